"""The task environment (docs/ARCHITECTURE.md, "The task environment"), per framework.

Given the published cluster (every task's host:port) and one task's identity,
produce the variables its command sees, so that programs written for `ytf-submit`
(`DTF_*`), for TonY (`JOB_NAME`, `CLUSTER_SPEC`, ...) and for TensorFlow
(`TF_CONFIG`) or PyTorch run unchanged.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from dataclasses import dataclass

from tony_airflow.core.protocol import ENV_APPLICATION_ID, ENV_ATTEMPT, RENDEZVOUS_BACKEND, elastic_rendezvous
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
        **torchrun_env(job, me, (master_host, master_port), hosts[me.type][me.index].rsplit(":", 1)[0], rank,
                       len(order)),
    }


def torchrun_env(job: JobSpec, me: TaskIdentity, master: tuple[str, str], own_host: str, node_rank: int,
                 nodes: int) -> dict[str, str]:
    """torchrun's settings as its own environment variables (it reads each option `--x-y` from `PET_X_Y`),
    so the command is the one a user types by hand (`torchrun train.py`) and nothing rewrites it.

    The static rendezvous, with the container's rank as its node rank: global rank 0, where programs save
    their checkpoints, is then in the chief's container, whose output is the one committed to the job's
    output (core/executor/output_commit.py); c10d's rendezvous ranks nodes by host name and pid instead.
    Its store listens on the chief's reserved port (held with SO_REUSEADDR until it binds: port.py).
    No restarts: a failed process fails its container and the job's attempts take over. Elastic jobs take
    torchrun's c10d rendezvous instead (elastic_env)."""
    task = job.tasks[me.type]
    if job.elastic_max:
        env = elastic_env(job, master, own_host, node_rank, nodes)
    else:
        env = {
            "PET_NNODES": str(nodes),
            "PET_NODE_RANK": str(node_rank),
            "PET_RDZV_BACKEND": "static",
            "PET_MASTER_ADDR": master[0],
            "PET_MASTER_PORT": master[1],
            "PET_MAX_RESTARTS": "0",
        }
    env.update({
        "PET_NPROC_PER_NODE": str(task.nproc_per_node),
        "PET_RDZV_ENDPOINT": f"{master[0]}:{master[1]}",
        "PET_RDZV_ID": f"{me.app_id}-{me.attempt}",
    })
    if "OMP_NUM_THREADS" not in job.env:  # torchrun would set 1; the container's vcores shared by its processes
        env["OMP_NUM_THREADS"] = str(max(1, task.vcores_of(me.index) // task.nproc_per_node))
    return env


def elastic_env(job: JobSpec, master: tuple[str, str], own_host: str, node_rank: int,
                nodes: int) -> dict[str, str]:
    """torchrun's elastic settings for MIN..MAX workers besides the others (the master, when there is one):
    the survivors' agents re-form the group around a replacement (core/am/elastic.py). Restarts: the free
    retries' bound.

    The rendezvous is the AM's (`tony`, core/am/rendezvous.py, issue 51): no container's loss ends it, the
    rank-0 container's included; rank 0 is the chief's container whenever it is in the round (its output is
    the one committed). With `TONY_ELASTIC_RENDEZVOUS=c10d` in the job's environment, torchrun's own c10d
    rendezvous hosted by the rank-0 container instead (`c10d_env`: its loss restarts the attempt)."""
    env = {
        "PET_NNODES": f"{job.elastic_min + nodes - job.elastic_max}:{nodes}",
        "PET_MAX_RESTARTS": str(job.max_free_retries),
    }
    if elastic_rendezvous(job.env) != RENDEZVOUS_BACKEND:
        env.update(c10d_env(own_host, node_rank))
    else:
        env.update({"PET_RDZV_BACKEND": RENDEZVOUS_BACKEND, "PET_LOCAL_ADDR": own_host})
    return env


def c10d_env(own_host: str, node_rank: int) -> dict[str, str]:
    """torchrun's c10d rendezvous, hosted by the rank-0 container (the master, else worker 0; never replaced)
    on its reserved port.

    c10d ranks its nodes by their address, then pid: the rank-0 container joins under its IPv4 address
    written as one hexadecimal number (`0x7f000001`: the same address to every resolver), which sorts before
    every dotted address and host name, so global rank 0 — where programs save — stays in the chief's
    container, whose output is committed. Each round's store is a new one on rank 0's host
    (TORCH_DISABLE_SHARE_RDZV_TCP_STORE): torch 2.15's shared store does not serve a node that joins in a
    later round (its agents time out waiting for the round's keys)."""
    rank0 = node_rank == 0
    return {
        "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_CONF": f"is_host={'1' if rank0 else '0'}",
        "PET_LOCAL_ADDR": first_sorting_address(own_host) if rank0 else own_host,
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
    }


def first_sorting_address(host: str) -> str:
    """`host`'s IPv4 address as one hexadecimal number (`0xc6120003` for 198.18.0.3), which every resolver
    reads as the same address and which sorts before any dotted address or host name; `host` itself when it
    has no IPv4 address."""
    try:
        address = ipaddress.IPv4Address(host)
    except ValueError:
        try:
            address = ipaddress.IPv4Address(socket.gethostbyname(host))
        except (OSError, ValueError):
            return host
    return f"0x{int(address):08x}"


# one per name in core.spec.FRAMEWORKS (tests/unit check it)
RUNTIMES = {"tensorflow": tensorflow_env, "pytorch": pytorch_env, "generic": lambda *a: {}}


def task_env(job: JobSpec, hosts: dict[str, list[str]], me: TaskIdentity) -> dict[str, str]:
    env = base_env(job, hosts, me)
    env.update(RUNTIMES[job.framework](job, hosts, me))
    return env
