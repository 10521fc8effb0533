"""The task environment (docs/ARCHITECTURE.md, "The task environment"), per framework.

Given the published cluster (every task's host:port) and one task's identity,
produce the variables its command sees, so that programs written for `ytf-submit`
(`DTF_*`), for TonY (`JOB_NAME`, `CLUSTER_SPEC`, ...) and for TensorFlow
(`TF_CONFIG`) or PyTorch run unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tony_airflow.core.protocol import ENV_APPLICATION_ID, ENV_ATTEMPT
from tony_airflow.core.spec import JobSpec


@dataclass(frozen=True)
class TaskIdentity:
    type: str
    index: int
    attempt: int
    app_id: str


def chief_of(cluster: dict[str, list[str]]) -> tuple[str, int] | None:
    """The task that is chief (IS_CHIEF), the output's writer: a chief, else master 0, else worker 0."""
    for name in ("chief", "master", "worker"):
        if cluster.get(name):
            return name, 0
    return None


def base_env(job: JobSpec, hosts: dict[str, list[str]], me: TaskIdentity) -> dict[str, str]:
    """What every task gets, whatever the framework."""
    cluster = {t: hosts[t] for t in job.cluster_types() if t in hosts}
    own = hosts[me.type][me.index]
    env = {
        "DTF_TASK_JOB_NAME": me.type,
        "DTF_TASK_INDEX": str(me.index),
        "DTF_TASK_PROGRAM": job.command_of(me.type),
        **{f"DTF_{t.upper()}_HOSTS": ",".join(addrs) for t, addrs in hosts.items()},
        "JOB_NAME": me.type,
        "TASK_INDEX": str(me.index),
        "TASK_NUM": str(sum(len(a) for a in cluster.values())),
        "IS_CHIEF": str(chief_of(cluster) == (me.type, me.index)).lower(),
        "CLUSTER_SPEC": json.dumps(cluster, sort_keys=True),
        ENV_APPLICATION_ID: me.app_id,
        ENV_ATTEMPT: str(me.attempt),
        "TONY_MAX_ATTEMPTS": str(job.max_attempts),
        "TONY_TASK_ADDRESS": own,
        "TONY_TASK_PORT": own.rsplit(":", 1)[1],
    }
    if job.input_path:
        env["DTF_INPUT_PATH"] = job.input_path
    if job.output_path:
        env["DTF_OUTPUT_PATH"] = job.output_path
    if job.docker_image:
        env["DTF_DOCKER_IMAGE"] = job.docker_image
    if me.type == "tensorboard":
        env["TB_PORT"] = own.rsplit(":", 1)[1]
    return env


def tensorflow_env(job: JobSpec, hosts: dict[str, list[str]], me: TaskIdentity) -> dict[str, str]:
    """TF_CONFIG: sidecars are never in the cluster; the evaluator only sees itself as its task."""
    if job.tasks[me.type].role == "sidecar":
        return {}
    cluster = {t: hosts[t] for t in job.cluster_types() if t in hosts and t != "evaluator"}
    return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": me.type, "index": me.index}})}


def pytorch_env(job: JobSpec, hosts: dict[str, list[str]], me: TaskIdentity) -> dict[str, str]:
    """torch.distributed's `env://` names, and TonY's (its PyTorchRuntime: `INIT_METHOD`, `RANK`, `WORLD`)
    for programs written for TonY; rank 0 is the chief (the master, else worker 0) in both."""
    if job.tasks[me.type].role == "sidecar":
        return {}
    order = [(t, i) for t in job.cluster_types() if t in hosts for i in range(len(hosts[t]))]
    chief = chief_of({t: hosts[t] for t in job.cluster_types() if t in hosts}) or order[0]
    master_host, master_port = hosts[chief[0]][chief[1]].rsplit(":", 1)
    return {
        "MASTER_ADDR": master_host,
        "MASTER_PORT": master_port,
        "RANK": str(order.index((me.type, me.index))),
        "WORLD_SIZE": str(len(order)),
        "LOCAL_RANK": "0",
        "INIT_METHOD": f"tcp://{master_host}:{master_port}",
        "WORLD": str(len(order)),
    }


# one per name in core.spec.FRAMEWORKS (tests/unit check it)
RUNTIMES = {"tensorflow": tensorflow_env, "pytorch": pytorch_env, "generic": lambda *a: {}}


def task_env(job: JobSpec, hosts: dict[str, list[str]], me: TaskIdentity) -> dict[str, str]:
    env = base_env(job, hosts, me)
    env.update(RUNTIMES[job.framework](job, hosts, me))
    return env
