"""Which skein service holds which task, and which tasks YARN starts before our AM does.

One skein service per task type, plus one per task whose memory or vcores
are overridden (`worker[0]:8192` -> service `worker-0`). Attempt 1's
containers are the services' initial instances: skein's Java AM asks YARN for
them the moment it registers, while our Python AM is still starting (as a bare
skein application would), and an executor tells from its skein container id
(`worker_1`) which task it is. Later attempts add containers one by one, with
the task named in their environment.
"""

from __future__ import annotations

from tony_airflow.core.spec import JobSpec


def service_names(job: JobSpec) -> dict[str, tuple[str, int, int, int]]:
    """skein service -> (type, memory MiB, vcores, gpus): one per type, one per task override."""
    services = {}
    for task in job.tasks.values():
        services[task.name] = (task.name, task.memory_mb, task.vcores, task.gpus)
        for index in sorted(set(task.memory_by_index) | set(task.vcores_by_index)):
            services[f"{task.name}-{index}"] = (task.name, task.memory_of(index), task.vcores_of(index), task.gpus)
    return services


def service_name(type_: str, index: int, job: JobSpec) -> str:
    """The skein service holding this task's container."""
    task = job.tasks[type_]
    if index in task.memory_by_index or index in task.vcores_by_index:
        return f"{type_}-{index}"
    return type_


def initial_tasks(job: JobSpec) -> dict[str, list[tuple[str, int]]]:
    """service -> the tasks its initial instances run, in skein's instance order (tasks run
    in the submitting process, such as the --client chief, have no container)."""
    local = set(job.local_types())
    placed: dict[str, list[tuple[str, int]]] = {name: [] for name in service_names(job)}
    for type_, index in job.task_ids():
        if type_ not in local:
            placed[service_name(type_, index, job)].append((type_, index))
    return placed


def initial_container_ids(job: JobSpec) -> dict[str, tuple[str, int]]:
    """skein container id (`<service>_<instance>`) -> task, for attempt 1."""
    return {f"{service}_{k}": task for service, tasks in initial_tasks(job).items() for k, task in enumerate(tasks)}


def task_of_container(job: JobSpec, skein_container_id: str) -> tuple[str, int]:
    """The task an initial container runs; KeyError for any other container."""
    return initial_container_ids(job)[skein_container_id]
