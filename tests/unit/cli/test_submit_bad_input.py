"""Bad input: each is refused with exit code 2 and one line naming the field; nothing is submitted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tony_airflow.cli import submit
from tony_airflow.core.spec import build_job_spec
from tony_airflow.core.spec_values import parse_memory_mb
from tony_airflow.errors import UsageError

S = str(Path(__file__).resolve().parents[2] / "payloads" / "sleep.py")  # whatever the working directory
CASES = [
    # (argv, text the one line must contain)
    (["cmd"], "cluster_requirement: missing"),
    (["-r", "", "cmd"], "cluster_requirement: is empty"),
    (["-r", "ps", "cmd"], "cluster_requirement: 'ps' is malformed"),
    (["-r", "ps:", "cmd"], "cluster_requirement: 'ps:' is malformed"),
    (["-r", ":2", "cmd"], "cluster_requirement: ':2' is malformed"),
    (["-r", "ps:0,worker:1", "cmd"], "cluster_requirement (ps): 0 is too small"),
    (["-r", "worker:-1", "cmd"], "cluster_requirement (worker): -1 is too small"),
    (["-r", "worker:x", "cmd"], "cluster_requirement (worker): 'x' is not a whole number"),
    (["-r", "worker:1.5", "cmd"], "cluster_requirement (worker): '1.5' is not a whole number"),
    (["-r", "ps:1,ps:2", "cmd"], "cluster_requirement: type 'ps' is given twice"),
    (["-r", "ps:1,,worker:2", "cmd"], "cluster_requirement: '' is malformed"),
    (["-r", "Bad Name:1", "cmd"], "cluster_requirement: 'Bad Name' is not a valid type name"),
    (["-r", "worker-a:1", "cmd"], "cluster_requirement: 'worker-a' is not a valid type name"),
    (["-r", "worker:2"], "task_command: no command for type 'worker'"),
    (["-r", "worker:2", "-m", "0", "cmd"], "task_memory: '0' must be at least 1 MiB"),
    (["-r", "worker:2", "-m", "-5", "cmd"], "task_memory: '-5' is not a memory size"),
    (["-r", "worker:2", "-m", "lots", "cmd"], "task_memory: 'lots' is not a memory size"),
    (["-r", "worker:2", "-m", "2 XB", "cmd"], "task_memory: '2 XB' is not a memory size"),
    (["-r", "worker:2", "-m", "gpu:2048", "cmd"], "task_memory: names unknown type 'gpu'"),
    (["-r", "worker:2", "-m", "worker[5]:2048", "cmd"], "task_memory: worker[5] is out of range"),
    (["-r", "worker:2", "-m", "worker[x]:2048", "cmd"], "task_memory (worker index): 'x' is not a whole number"),
    (["-r", "worker:2", "-m", "worker:", "cmd"], "task_memory: 'worker:' is not a memory size"),
    (["-r", "worker:2", "-c", "0", "cmd"], "task_vcores: 0 is too small"),
    (["-r", "worker:2", "-c", "ps:2", "cmd"], "task_vcores: names unknown type 'ps'"),
    (["-r", "worker:2", "-c", "worker:two", "cmd"], "task_vcores: 'two' is not a whole number"),
    (["-r", "worker:2", "--task_gpus", "worker:-1", "cmd"], "task_gpus: -1 is too small"),
    (["-r", "worker:2", "--task_gpus", "worker[0]:1", "cmd"], "task_gpus: worker[0] — the per-task form"),
    (["-r", "worker:1", "-s", "/no/such/script.py", "cmd"], "script: /no/such/script.py does not exist"),
    (["-r", "worker:1", "--src_dir", "/no/such/dir", "cmd"], "src_dir: /no/such/dir does not exist"),
    (["-r", "worker:1", "--src_dir", S, "cmd"], "is not a directory"),
    (["-r", "worker:1", "-t", "cmd"], "output: --tensorboard needs an output path"),
    (["-r", "worker:1", "--max-attempts", "0", "cmd"], "max_attempts: 0 is too small"),
    (["-r", "worker:1", "--timeout", "-3", "cmd"], "timeout (application): '-3' must be >= 0"),
    (["-r", "worker:1", "--heartbeat-timeout", "soon", "cmd"], "timeout (heartbeat): 'soon' is not a number"),
    (["-r", "worker:1", "--env", "NOEQUALS", "cmd"], "env: 'NOEQUALS' is malformed"),
    (["-r", "worker:1", "--env", "1BAD=x", "cmd"], "env: '1BAD' is not a variable name"),
    (["-r", "worker:1", "--bogus", "cmd"], "unrecognized arguments: --bogus"),
    (["-r", "worker:1", "-q", " ", "cmd"], "queue: is empty"),
    (["-r", "worker:1", "-n", "", "cmd"], "name: is empty"),
    (["-r", "worker:1", "--tracked", "chief", "cmd"], "tracked: names unknown type 'chief'"),
    (["-r", "ps:1,worker:1", "--untracked", "worker", "--tracked", "worker", "cmd"], "is already"),
    (["-r", "ps:1", "cmd"], "tracked: no tracked type decides the outcome"),
    (["-r", "worker:1", "--command", "ps=echo", "cmd"], "--command: names unknown type 'ps'"),
    (["-r", "worker:1", "--command", "noequals", "cmd"], "--command: 'noequals' is malformed"),
    (["-r", "worker:2", "--framework", "pytorch", "--spares", "1", "cmd"], "spares: 1 — spares take a lost elastic"),
    (["-r", "worker:2", "--framework", "pytorch", "--elastic", "1:2", "--spares", "-1", "cmd"],
     "spares: -1 is too small; allowed: a whole number from 0 to 64"),
    (["-r", "worker:2", "--framework", "pytorch", "--elastic", "1:2", "--spares", "one", "cmd"],
     "spares: 'one' is not a whole number"),
    (["-r", "worker:2", "--framework", "pytorch", "--elastic", "1:2", "--spares", "65", "cmd"],
     "spares: 65 is too large; allowed: at most 64"),
    (["-r", "worker:1", "--framework", "mxnet", "cmd"], "framework: 'mxnet' is not supported"),
    (["--conf", "/no/such/job.yaml"], "conf: /no/such/job.yaml does not exist"),
    (["-r", "worker:1", "--history-dir", "relative/dir", "cmd"], "history_dir: 'relative/dir' is not an absolute"),
]


@pytest.mark.parametrize("argv,expected", CASES, ids=[" ".join(c[0]) or "(nothing)" for c in CASES])
def test_cli_refuses(argv, expected, capsys, monkeypatch):
    submitted = []
    monkeypatch.setattr(submit, "TonyClient", lambda *a, **k: submitted.append(a))
    with pytest.raises(SystemExit) as exc:
        submit.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2
    assert len(err) == 1, err
    assert expected in err[0], err[0]
    assert not submitted


def test_at_least_thirty_cases():
    assert len(CASES) >= 30


@pytest.mark.parametrize("text,field", [
    ("tasks: [1, 2]\n", "tasks: expected a mapping"),
    ("tasks: {worker: {instances: 1, colour: red}}\ncommand: x\n", "tasks.worker: unknown field 'colour'"),
    ("surprise: 1\n", "conf: unknown field 'surprise'"),
    ("- just\n- a list\n", "must hold a mapping"),
    ("a: [unclosed\n", "is not valid YAML or JSON"),
    ("cluster_requirement: worker:1\ncommand: x\ntimeouts: {forever: 1}\n", "timeouts: unknown key 'forever'"),
])
def test_job_file_refuses(tmp_path, text, field, capsys):
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(SystemExit) as exc:
        submit.main(["--conf", str(path)])
    assert exc.value.code == 2
    assert field in capsys.readouterr().err


def test_memory_forms():
    assert parse_memory_mb("2048", "m") == 2048
    assert parse_memory_mb("2 GiB", "m") == 2048
    assert parse_memory_mb("1.5g", "m") == 1536
    assert parse_memory_mb("512M", "m") == 512
    with pytest.raises(UsageError):
        parse_memory_mb("0.1", "m")


def test_resource_forms_most_specific_wins():
    job = build_job_spec({"cluster_requirement": "ps:1,worker:3", "command": "x",
                          "task_memory": ["1024", "worker:4096", "worker[2]:8 GiB"],
                          "task_vcores": "2,ps:1,worker[0]:4"})
    w, ps = job.tasks["worker"], job.tasks["ps"]
    assert [w.memory_of(i) for i in range(3)] == [4096, 4096, 8192]
    assert ps.memory_of(0) == 1024
    assert [w.vcores_of(i) for i in range(3)] == [4, 2, 2] and ps.vcores == 1
    assert (ps.role, w.role) == ("untracked", "tracked")


def test_spec_json_roundtrip():
    job = build_job_spec({"cluster_requirement": "chief:1,worker:2,ps:1", "command": "x",
                          "task_memory": "worker[1]:3000", "tensorboard": True, "output": "/o",
                          "max_attempts": 3, "timeouts": {"heartbeat": 5}})
    from tony_airflow.core.spec import JobSpec

    assert JobSpec.from_json(job.to_json()) == job
    assert job.tasks["tensorboard"].role == "sidecar"


def test_spares_ride_with_an_elastic_job_and_default_to_none():
    base = {"cluster_requirement": "worker:2", "command": "x", "framework": "pytorch", "elastic": "1:2"}
    assert build_job_spec(base, check_paths=False).spares == 0
    spec = build_job_spec({**base, "spares": "2"}, check_paths=False)
    assert spec.spares == 2
    assert type(spec).from_json(spec.to_json()).spares == 2
