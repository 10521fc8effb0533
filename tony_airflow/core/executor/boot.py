"""How one of attempt 1's executors learns its task and the registry's address.

skein started attempt 1's containers before our AM listened (core/placement.py),
and starts them again in every new YARN application attempt (a lost AM), where
they run the training attempt the new AM goes on with (INITIAL_ATTEMPT_KEY):
the task follows from the skein container id, and the registry's address is
waited for in skein's key-value store, where the AM puts it. That needs skein's
gRPC client, and gRPC does not survive a fork (the user command's process would
abort in gRPC's event poller), so the lookup runs in a forked child that answers
through a pipe and exits. The executor itself never loads gRPC, and it imports
its own modules while the child waits: one interpreter start instead of two.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tony_airflow.core.protocol import AM_ADDRESS_KEY, ENV_TASK_TYPE, INITIAL_ATTEMPT_KEY, JOB_FILE, launch_env

if TYPE_CHECKING:
    from tony_airflow.core.spec import JobSpec


def first_attempt_env(job: JobSpec, env: Mapping[str, str], kv: Any = None) -> dict[str, str] | None:
    """What a retry's container is told in its environment, found out by one of attempt 1's;
    None when the environment already names the task. `kv` is skein's key-value store."""
    if ENV_TASK_TYPE in env:
        return None
    from tony_airflow.core.placement import task_of_container

    type_, index = task_of_container(job, env["SKEIN_CONTAINER_ID"])
    if kv is None:
        import skein

        kv = skein.ApplicationClient.from_current().kv
    address = kv.wait(AM_ADDRESS_KEY).decode()
    attempt = int(kv.get(INITIAL_ATTEMPT_KEY) or b"1")  # the AM puts it before the address
    return launch_env(type_, index, attempt, address, env.get("SKEIN_APPLICATION_ID", ""))


class Lookup:
    """The forked child's answer, read when the executor needs it."""

    def __init__(self, pid: int, fd: int):
        self.pid = pid
        self.fd = fd

    def result(self) -> dict[str, str]:
        with os.fdopen(self.fd, "rb") as answer_pipe:
            raw = answer_pipe.read()
        _, status = os.waitpid(self.pid, 0)
        try:
            answer = json.loads(raw)
        except ValueError:
            raise RuntimeError(f"the task lookup ended without an answer (wait status {status})") from None
        if "error" in answer:
            raise RuntimeError(f"could not learn this container's task: {answer['error']}")
        return answer


def start_lookup(env: Mapping[str, str], job_file: str = JOB_FILE) -> Lookup | None:
    """Fork the lookup for one of attempt 1's containers; None for a retry's (already told)."""
    if ENV_TASK_TYPE in env:
        return None
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer, then leave without running the parent's exit handlers
        os.close(read_fd)
        try:
            from tony_airflow.core.spec import JobSpec

            answer: dict[str, Any] = first_attempt_env(JobSpec.from_json(Path(job_file).read_text()), env) or {}
        except BaseException as exc:  # noqa: BLE001 - every failure must reach the parent
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        with os.fdopen(write_fd, "w") as answer_pipe:
            json.dump(answer, answer_pipe)
        os._exit(0)
    os.close(write_fd)
    return Lookup(pid, read_fd)
