"""A spare's command started before its place (issue 54): only torchrun under the AM's rendezvous on the node
itself starts early; the place's environment reaches it whole and private; its output before the place goes to
the task's output once placed; a spare never placed leaves nothing running; torch's agent gives its workers
`os.environ` as it is when it starts them (what the handler's hand-over relies on)."""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.unit.core.support import make_job
from tony_airflow.core import protocol
from tony_airflow.core.executor.spare_command import EarlyCommand, is_torchrun
from tony_airflow.core.executor.task import Executor
from tony_airflow.core.runtimes import TaskIdentity

# stands in for torch's agent in its first rendezvous: waits for the place's file, says what it read
AGENT = (f"{sys.executable} -c \"import json, os, sys, time; p = os.environ['{protocol.SPARE_PLACE_ENV}'];"
         "print('agent up', flush=True);"
         "exec('while not os.path.exists(p): time.sleep(0.02)');"
         "print('placed as', json.load(open(p))['TASK_INDEX'], oct(os.stat(p).st_mode & 0o777), flush=True)\"")


@pytest.mark.parametrize("command, early", [
    ("torchrun -m tony_airflow.examples.digits_torch --epochs 2", True),
    ("/opt/venv/bin/torchrun --nproc-per-node 2 train.py", True),
    ("python3 -m torch.distributed.run train.py", True),
    ("python train.py", False),                       # not torch's agent: it would run without its place's env
    ("python prep.py && torchrun train.py", False),   # prep.py would
    ("bash -c 'torchrun train.py'", False),
    ("torchrun 'unclosed", False),
    ("", False),
    # bash expands these when it starts, before the place: the workers would get worker 0's and the job's
    # hdfs:// values as arguments (a reviewer's script: --train_dir hdfs://nn/out --index 0)
    ("torchrun train.py --train_dir ${DTF_OUTPUT_PATH} --index $TASK_INDEX", False),
    ("torchrun train.py --out `pwd`", False),
    ("torchrun train.py --out $(pwd)", False),
    # what runs after torchrun runs in the early environment (TASK_INDEX=0, IS_CHIEF=true, port 0)
    ("torchrun train.py && python export.py", False),
    ("torchrun train.py; python export.py", False),
    ("torchrun train.py | tee log", False),
    ("torchrun train.py > log 2>&1", False),
    ("torchrun train.py &", False),
    ("torchrun train.py\npython export.py", False),
    ("(torchrun train.py)", False),
    # a rendezvous of its own: the agent would never wait for its place
    ("torchrun --standalone train.py", False),
    ("torchrun --rdzv-backend=c10d train.py", False),
    ("torchrun --rdzv_backend c10d train.py", False),
    ("torchrun --rdzv-endpoint h:29400 train.py", False),
    ("torchrun --rdzv_endpoint=h:29400 train.py", False),
    ("torchrun --nproc-per-node=2 train.py --lr 0.1", True),
    # torchrun's argparse takes a shortened option: the same rendezvous of its own (a reviewer's script)
    ("torchrun --standal train.py", False),
    ("torchrun --rdzv-back=c10d --rdzv-end=h:1 train.py", False),
    ("torchrun --rdzv_back=c10d train.py", False),
    ("torchrun --rdzv-id=7 --rdzv-conf=timeout=60 train.py", True),
])
def test_only_torchrun_itself_starts_before_the_place(command, early):
    assert is_torchrun(command) is early


def _early(tmp_path: Path, command: str = AGENT) -> EarlyCommand:
    return EarlyCommand(command, {**os.environ}, str(tmp_path), tmp_path / "place.json")


def test_the_place_s_environment_reaches_the_waiting_command_whole_and_private_and_its_output_follows(tmp_path):
    early = _early(tmp_path)
    deadline = time.monotonic() + 30
    while not early._held:  # it said something before its place: held
        assert time.monotonic() < deadline and early.alive()
        time.sleep(0.05)
    seen: list[tuple[str, bytes]] = []
    child = early.hand_over({"TASK_INDEX": "1", "CLUSTER_SPEC": "{}"}, lambda stream, chunk: seen.append((stream, chunk)))
    assert child is early.process and child.wait() == 0
    out = b"".join(chunk for stream, chunk in seen if stream == "stdout").decode()
    assert out == "agent up\nplaced as 1 0o600\n", out  # what it said before its place first, then after
    assert json.loads((tmp_path / "place.json").read_text()) == {"TASK_INDEX": "1", "CLUSTER_SPEC": "{}"}
    assert stat.S_IMODE((tmp_path / "place.json").stat().st_mode) == 0o600
    assert not list(tmp_path.glob("*.part"))


def test_a_spare_never_placed_stops_its_command_and_nothing_is_left_running(tmp_path, capfd):
    early = _early(tmp_path, f"{sys.executable} -c \"import time; print('waiting', flush=True); time.sleep(600)\" & wait")
    deadline = time.monotonic() + 30
    while not early._held:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    group = [p for p in psutil.process_iter() if _pgid(p.pid) == early.process.proc.pid]
    assert len(group) >= 2  # the guard, bash, python
    early.end(grace=2)
    assert not early.alive()
    assert not [p for p in group if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert "waiting" in capfd.readouterr().out  # its own log has what it said


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return -1


def _executor(**kw) -> Executor:
    job = make_job("master:1,worker:2", **{"framework": "pytorch", "elastic": "1:2", "spares": 1,
                                           "command": "torchrun -m tony_airflow.examples.digits_torch", **kw})
    return Executor(job, TaskIdentity("worker", 0, 1, "app_1"), None, "host-9")  # type: ignore[arg-type]


def test_a_spare_starts_torchrun_early_with_torchrun_s_settings_and_not_other_commands(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    started: list = []
    monkeypatch.setattr("tony_airflow.core.executor.task.EarlyCommand",
                        lambda command, env, cwd, place: started.append((command, env, place)) or "early")
    assert _executor().start_early() == "early"
    command, env, place = started[0]
    assert command == "torchrun -m tony_airflow.examples.digits_torch" and place == tmp_path / "tony-spare-place.json"
    # what torch's agent reads at its start: the job's elastic settings and the AM's rendezvous with its plugin
    assert (env["PET_NNODES"], env["PET_RDZV_BACKEND"], env["PET_LOCAL_ADDR"], env["PET_RDZV_ID"]) == \
        ("2:3", "tony", "host-9", "app_1-1")
    assert env["PET_NPROC_PER_NODE"] == "1" and env[protocol.RENDEZVOUS_SECRET_ENV].endswith(protocol.SECRET_FILE)
    assert ".tony-torchrun" in env["PYTHONPATH"]
    assert _executor(command="python train.py").start_early() is None
    assert _executor(env={protocol.ELASTIC_RENDEZVOUS_ENV: "c10d"}).start_early() is None
    assert _executor(docker_image="img:1").start_early() is None  # the engine's container: started once placed
    assert len(started) == 1


def test_torch_s_agent_starts_its_workers_with_os_environ_as_it_is_then(tmp_path, monkeypatch):
    """What the handler's hand-over relies on (torch 2.x: SubprocessHandler copies os.environ at Popen)."""
    handler_module = pytest.importorskip("torch.distributed.elastic.multiprocessing.subprocess_handler")
    out = tmp_path / "out"
    monkeypatch.setenv("TONY_PLACE_PROBE", "placed")
    handler = handler_module.SubprocessHandler(
        sys.executable, ("-c", "import os; print(os.environ['TONY_PLACE_PROBE'], os.environ['LOCAL_RANK'])"),
        {"LOCAL_RANK": "0"}, str(out), None, 0, None)
    assert handler.proc.wait(60) == 0
    assert out.read_text() == "placed 0\n"


def test_a_waiting_spare_stopped_by_yarn_ends_its_early_torchrun_and_keeps_what_it_said(tmp_path, capfdbinary):
    """A reviewer's script: YARN kills the waiting spares at the attempt's end (SIGTERM), racing the AM's
    'stop'; the executor had no SIGTERM handler before its place, died at once, and what its torchrun said while
    waiting never reached the spare's log (the guard still killed the group: nothing was left running)."""
    from tony_airflow.core.executor.task import end_early_on_sigterm

    early = _early(tmp_path)
    deadline = time.monotonic() + 30
    while not early._held and time.monotonic() < deadline:
        time.sleep(0.05)
    handler = end_early_on_sigterm(early, grace=1.0)
    with pytest.raises(SystemExit) as ended:
        handler(signal.SIGTERM, None)
    assert ended.value.code == 0
    assert not early.process.alive()
    assert b"agent up" in capfdbinary.readouterr().out
