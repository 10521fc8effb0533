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
    for programs written for TonY; rank 0 is the chief (the master, else worker 0) in both. A plain
    `python train.py` is one process per container with these; torchrun replaces them in its processes."""
    if job.tasks[me.type].role == "sidecar":
        return {}
    order = [(t, i) for t in job.cluster_types() if t in hosts for i in range(len(hosts[t]))]
    chief = chief_of({t: hosts[t] for t in job.cluster_types() if t in hosts}) or order[0]
    master_host, master_port = hosts[chief[0]][chief[1]].rsplit(":", 1)
    rank = order.index((me.type, me.index))
    return {
        "MASTER_ADDR": master_host,
        "MASTER_PORT": master_port,
        "RANK": str(rank),
        "WORLD_SIZE": str(len(order)),
        "LOCAL_RANK": "0",
        "INIT_METHOD": f"tcp://{master_host}:{master_port}",
        "WORLD": str(len(order)),
        **torchrun_env(job, me, (master_host, master_port), rank, len(order)),
    }


def torchrun_env(job: JobSpec, me: TaskIdentity, master: tuple[str, str], node_rank: int,
                 nodes: int) -> dict[str, str]:
    """torchrun's settings as its own environment variables (it reads each option `--x-y` from `PET_X_Y`),
    so the command is the one a user types by hand (`torchrun train.py`) and nothing rewrites it.

    The static rendezvous, with the container's rank as its node rank: global rank 0, where programs save
    their checkpoints, is then in the chief's container, whose output is the one committed to the job's
    output (core/executor/output_commit.py); c10d's rendezvous ranks nodes by host name and pid instead.
    Its store listens on the chief's reserved port (held with SO_REUSEADDR until it binds: port.py).
    No restarts: a failed process fails its container and the job's attempts take over."""
    task = job.tasks[me.type]
    env = {
        "PET_NNODES": str(nodes),
        "PET_NODE_RANK": str(node_rank),
        "PET_NPROC_PER_NODE": str(task.nproc_per_node),
        "PET_RDZV_BACKEND": "static",
        "PET_RDZV_ENDPOINT": f"{master[0]}:{master[1]}",
        "PET_MASTER_ADDR": master[0],
        "PET_MASTER_PORT": master[1],
        "PET_RDZV_ID": f"{me.app_id}-{me.attempt}",
        "PET_MAX_RESTARTS": "0",
    }
    if "OMP_NUM_THREADS" not in job.env:  # torchrun would set 1; the container's vcores shared by its processes
        env["OMP_NUM_THREADS"] = str(max(1, task.vcores_of(me.index) // task.nproc_per_node))
    return env


# one per name in core.spec.FRAMEWORKS (tests/unit check it)
RUNTIMES = {"tensorflow": tensorflow_env, "pytorch": pytorch_env, "generic": lambda *a: {}}


def task_env(job: JobSpec, hosts: dict[str, list[str]], me: TaskIdentity) -> dict[str, str]:
    env = base_env(job, hosts, me)
    env.update(RUNTIMES[job.framework](job, hosts, me))
    return env
