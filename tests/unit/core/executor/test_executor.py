"""The executor: refusals, a lost AM, a long stderr line (issue #15, items 7, 10, 14, 17)."""

from __future__ import annotations

import asyncio
import io
import os
import sys
import time

import pytest

from tests.unit.core.support import SECRET, RecordingRegistry, make_job, serve
from tony_airflow.core import protocol
from tony_airflow.core.am import server
from tony_airflow.core.am.registry import Registry


# ---------------------------------------------------- 10, 7, 14, 17: the executor
def test_the_executor_turns_a_refusal_into_a_one_line_error():
    from tony_airflow.core.executor.task import RefusedByAM, RegistryClient

    async def scenario():
        reg = Registry(make_job("worker:1"), "app_1")
        reg.new_attempt(2)
        client = await serve(server.build_app(reg, SECRET))
        try:
            rc = RegistryClient(f"127.0.0.1:{client.port}", SECRET)
            with pytest.raises(RefusedByAM, match="attempt 1 is over"):
                await asyncio.to_thread(rc.call, "POST", protocol.REGISTER,
                                        {"type": "worker", "index": 0, "attempt": 1, "host": "h", "port": 1})
        finally:
            await client.close()

    asyncio.run(scenario())


def test_the_executor_stops_its_command_when_the_am_is_gone(tmp_path):
    """No AM answers: after the give-up time the command is stopped and the executor exits non-zero."""
    from tony_airflow.core.executor.task import AM_LOST_EXIT, Executor, RegistryClient
    from tony_airflow.core.runtimes import TaskIdentity

    job = make_job("worker:1", timeouts={"heartbeat": 2}, heartbeat_interval=0.2)
    job.command = f"{sys.executable} -c 'import time; time.sleep(120)'"
    me = TaskIdentity(type="worker", index=0, attempt=1, app_id="app_1")

    class AMThatDiesAfterTheSpec(RegistryClient):
        def call(self, method, path, payload=None, retries=5, timeout=None):
            if path.startswith(protocol.REGISTER):
                return {"ok": True, "gpus": []}
            if path.startswith(protocol.CLUSTER_SPEC):
                return {"state": "ready", "spec": {"hosts": {"ps": [], "worker": ["h:1"]}}}
            raise ConnectionRefusedError("connection refused")

    executor = Executor(job, me, AMThatDiesAfterTheSpec("127.0.0.1:9", SECRET), "h", local=True)
    started = time.monotonic()
    code = executor.run()
    took = time.monotonic() - started
    assert code == AM_LOST_EXIT
    assert took < 15, took
    assert executor.child is not None and not executor.child.alive()


def test_the_stderr_pump_caps_a_line_without_newline(tmp_path):
    from tony_airflow.core.executor.child import TAIL_CHARS, UserProcess

    sink = io.BytesIO()
    code = "import sys; sys.stderr.write('x' * (20 * 2**20)); sys.stderr.write('END'); sys.exit(3)"
    proc = UserProcess(f"{sys.executable} -c \"{code}\"", dict(os.environ), stderr_sink=sink)
    assert proc.wait() == 3
    tail = proc.stderr_tail()
    assert len(tail) <= TAIL_CHARS and tail.endswith("END")
    assert sink.tell() == 20 * 2**20 + 3  # everything still reaches the container log
    assert proc.max_buffered <= 2**20


def test_a_containers_command_keeps_its_temporary_files_in_the_container(tmp_path):
    """TensorFlow's autograph writes a module per traced function into the temp dir (and its
    __pycache__ stays): in a container that is the container's own tmp (YARN makes it and removes it
    with the container), unless the job or the NodeManager names another."""
    from tony_airflow.core.executor.task import container_tmp_env

    assert container_tmp_env({}, tmp_path) == {"TMPDIR": str(tmp_path / "tmp")}
    assert (tmp_path / "tmp").is_dir()
    assert container_tmp_env({"TMPDIR": "/scratch"}, tmp_path) == {}


# ------------------------------------------------- issue #29: the last push of the output
class _Mirror:
    uri = "hdfs:///out"
    settle_s = 0.5  # the event-driven mirror's: a failure's last half second is not trusted

    def __init__(self, error: Exception | None = None) -> None:
        self.error, self.calls = error, []

    def finish(self, cutoff: float = float("inf"), ended_at: float | None = None) -> int:
        """Records the cutoff the real mirror would use (given the end's time: that time less its settle time)."""
        self.calls.append(("finish", cutoff if ended_at is None else ended_at - self.settle_s))
        if self.error:
            raise self.error
        return 1

    def halt(self) -> None:
        self.calls.append(("halt",))

    def stop(self) -> None:
        self.calls.append(("stop",))


def _chief(registry=None):
    from tony_airflow.core.executor.task import Executor
    from tony_airflow.core.runtimes import TaskIdentity

    job = make_job("chief:1")
    return Executor(job, TaskIdentity(type="chief", index=0, attempt=1, app_id="app_1"), registry or RecordingRegistry(),
                    "h", local=True)


def test_a_failed_final_push_is_reported_in_one_line_not_a_crash():
    from tony_airflow.core.executor.task import OUTPUT_NOT_PUBLISHED

    registry = RecordingRegistry()
    executor = _chief(registry)
    reason = executor._finish_output(_Mirror(OSError(113, "No route to host")), True, 0, time.time())
    assert reason == "the output could not be published to hdfs:///out: [Errno 113] No route to host"
    executor._report(OUTPUT_NOT_PUBLISHED, reason)
    path, payload = registry.sent[-1]
    assert path == protocol.FINISHED and payload["exit_code"] == OUTPUT_NOT_PUBLISHED == 74
    assert payload["stderr_tail"].splitlines()[-1] == f"tony: {reason}"


def test_a_chief_whose_am_is_gone_publishes_nothing_and_a_stopped_one_only_what_was_whole_before_the_stop():
    executor = _chief()
    executor.am_lost.set()
    mirror = _Mirror()
    assert executor._finish_output(mirror, True, 0, time.time()) == ""
    assert mirror.calls == [("halt",)]

    executor = _chief()
    executor.stopped_at = 1000.0
    mirror = _Mirror()
    executor.stop_requested.set()
    executor._finish_output(mirror, True, 143, 1003.0)
    assert mirror.calls == [("finish", 1000.0 - mirror.settle_s)]

    executor = _chief()  # exited 0 by itself: everything it wrote is whole
    mirror = _Mirror()
    executor._finish_output(mirror, True, 0, 1003.0)
    assert mirror.calls == [("finish", float("inf"))]
    mirror = _Mirror()  # exited non-zero by itself: what it was writing when it failed may be torn
    executor._finish_output(mirror, True, 1, 1003.0)
    assert mirror.calls == [("finish", 1003.0 - mirror.settle_s)]


def test_the_executor_uses_the_hdfs_token_its_am_hands_over_and_ignores_one_not_sealed_for_it(monkeypatch):
    """Issue #44 item 2: a new HDFS token in a heartbeat answer, from the job's keytab, goes to every WebHDFS
    call of the executor (the output mirror's rounds); once, not at every heartbeat."""
    from tony_airflow.core.executor.task import Executor, RegistryClient
    from tony_airflow.core.runtimes import TaskIdentity
    from tony_airflow.yarn import hdfs

    monkeypatch.setattr(hdfs, "_renewed_token", None)
    executor = Executor(make_job("worker:1"), TaskIdentity(type="worker", index=0, attempt=1, app_id="app_1"),
                        RegistryClient("127.0.0.1:9", SECRET), "h", local=True)
    executor._take_hdfs_token(protocol.seal("another job's secret", "forged"))
    assert hdfs.renewed_hdfs_token() is None
    sealed = protocol.seal(SECRET, "renewed")
    executor._take_hdfs_token(sealed)
    assert hdfs.renewed_hdfs_token() == "renewed"
    hdfs.use_hdfs_token("later")
    executor._take_hdfs_token(sealed)  # the same answer again: nothing to do
    assert hdfs.renewed_hdfs_token() == "later"


def test_the_program_gets_the_job_s_env_values_exactly_as_the_job_file_has_them():
    """Issue #52: YARN's launch script wrote OPENLINEAGE_CONTEXT's JSON without its quotes and cut at `}}`
    (seen in the real Airflow deployment); the executor restores the job's values from the job file."""
    from tony_airflow.core.executor.task import with_job_env

    exact = '{"parent":{"run":{"runId":"r1"},"job":{"namespace":"default","name":"d.t"}}}'
    mangled = "{parent:{run:{runId:r1},job:{namespace:default,name:d.t"
    env = with_job_env({"OPENLINEAGE_CONTEXT": mangled, "PATH": "/bin"}, {"OPENLINEAGE_CONTEXT": exact})
    assert env == {"OPENLINEAGE_CONTEXT": exact, "PATH": "/bin"}


def test_a_job_env_value_that_names_a_variable_keeps_yarns_expansion():
    """A review: `--env 'PATH=/opt/tools/bin:$PATH'` (Hadoop's idiom, expanded by YARN's launch script) was
    replaced by its literal text, and the guard could not find bash (exit 127). A value that names a variable
    (`$`, YARN's `{{...}}`) keeps what the launch script made of it."""
    from tony_airflow.core.executor.task import with_job_env

    env = with_job_env({"PATH": "/opt/tools/bin:/usr/bin", "HOME_DIR": "/grid/0"},
                       {"PATH": "/opt/tools/bin:$PATH", "HOME_DIR": "{{PWD}}"})
    assert env == {"PATH": "/opt/tools/bin:/usr/bin", "HOME_DIR": "/grid/0"}
