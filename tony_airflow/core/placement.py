"""Which skein service holds which task, and which tasks YARN starts before our AM does.

One skein service per task type, plus one per task whose memory or vcores
are overridden (`worker[0]:8192` -> service `worker-0`). A spread type
(`--spread worker`) has one service per host it may use instead, asking for
that host with locality not relaxed (`worker-on-2` -> the third of its
`spread_hosts`): task i starts on host i, and a later request (a retry, a gang
asking again) may take any host no other task of the type holds. Attempt 1's
containers are the services' initial instances: skein's Java AM asks YARN for
them the moment it registers, while our Python AM is still starting (as a bare
skein application would), and an executor tells from its skein container id
(`worker_1`) which task it is. Later attempts add containers one by one, with
the task named in their environment.
"""

from __future__ import annotations

from tony_airflow.core.spec import JobSpec


def service_names(job: JobSpec) -> dict[str, tuple[str, int, int, int]]:
    """skein service -> (type, memory MiB, vcores, gpus): one per type, one per task override, one per host
    of a spread type."""
    services = {}
    for task in job.tasks.values():
        if task.name in job.spread:
            for slot in range(len(job.spread_hosts.get(task.name, []))):
                services[spread_service(task.name, slot)] = (task.name, task.memory_mb, task.vcores, task.gpus)
            continue
        services[task.name] = (task.name, task.memory_mb, task.vcores, task.gpus)
        for index in sorted(set(task.memory_by_index) | set(task.vcores_by_index)):
            services[f"{task.name}-{index}"] = (task.name, task.memory_of(index), task.vcores_of(index), task.gpus)
    return services


def spread_service(type_: str, slot: int) -> str:
    """The service of a spread type that asks for its `slot`-th host."""
    return f"{type_}-on-{slot}"


def service_host(job: JobSpec, service: str) -> str:
    """The host a spread type's service asks for ("" for any other service)."""
    for type_ in job.spread:
        prefix = f"{type_}-on-"
        if service.startswith(prefix) and service[len(prefix):].isdigit():
            hosts = job.spread_hosts.get(type_, [])
            slot = int(service[len(prefix):])
            return hosts[slot] if slot < len(hosts) else ""
    return ""


def service_name(type_: str, index: int, job: JobSpec) -> str:
    """The skein service holding this task's container (a spread task: the host of its own index)."""
    task = job.tasks[type_]
    if type_ in job.spread:
        return spread_service(type_, index)
    if index in task.memory_by_index or index in task.vcores_by_index:
        return f"{type_}-{index}"
    return type_


def spread_services(job: JobSpec, type_: str, indices: list[int], taken: set[str],
                    avoid: set[str]) -> dict[int, str]:
    """Services for these tasks of a spread type: hosts not `taken` (held by the type's other tasks), those
    in `avoid` (lost) last; a task keeps its own host when it is free. Fewer hosts than tasks: KeyError."""
    hosts = job.spread_hosts.get(type_, [])
    free = [slot for slot, host in enumerate(hosts) if host not in taken]
    free.sort(key=lambda slot: hosts[slot] in avoid)
    chosen: dict[int, str] = {}
    for index in indices:
        if index in free and hosts[index] not in avoid:
            chosen[index] = spread_service(type_, index)
            free.remove(index)
    for index in indices:
        if index not in chosen:
            if not free:
                raise KeyError(f"{type_}: no free host left for task {index}")
            chosen[index] = spread_service(type_, free.pop(0))
    return chosen


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
