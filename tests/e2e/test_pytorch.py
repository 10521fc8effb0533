"""Real PyTorch (PyPI's torch, gloo on CPU) on the local YARN (issue #42): DDP training of the digits example
into HDFS, torchrun with several processes per container (as a DAG node), and a program written for TonY."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from bench import torch_elastic
from tests.e2e.helpers import (
    PAYLOADS,
    aggregated_logs,
    assert_training_shown,
    record,
    run_dag,
    submit_watching_training,
    watch_with_a_deferred_sensor,
    ytf_submit,
)
from tony_airflow.core.history.reader import load_by_id
from tony_airflow.core.history.store import HistoryStore
from tony_airflow.yarn.hdfs import webhdfs

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]


def _metrics(path: str) -> dict:
    return json.loads(webhdfs().cat(f"{path}/metrics.json"))


def test_a_master_and_two_workers_train_the_digits_with_ddp_into_hdfs(local_cluster, rm, tmp_path):
    """One process per container (`python -m …`): torch's env:// names; every rank ends with the same
    parameters, rank 0 (the master) saved its checkpoint into the job's output in HDFS. Issue #52: the
    master's reports (`tony_progress.report` in the loop) reach the AM's page and ytf-submit's line."""
    out = "/tmp/e2e/torch-ddp"
    proc, seen = submit_watching_training(rm, tmp_path, "-r", "master:1,worker:2", "--framework", "pytorch",
                                          "-m", "2048", "-o", f"hdfs://{out}", "-n", "torch-ddp",
                                          "python3 -m tony_airflow.examples.digits_torch --epochs 6 "
                                          "--sleep-per-epoch 0.5")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert_training_shown(proc, seen, "master:0", epochs=6, steps=6 * 20)
    metrics = _metrics(out)
    assert metrics["test_accuracy"] > 0.9, metrics
    ranks = metrics["ranks"]
    assert sorted(r["rank"] for r in ranks) == [0, 1, 2] and {r["world_size"] for r in ranks} == {3}
    assert len({r["parameters"] for r in ranks}) == 1, ranks  # DDP: identical parameters on every rank
    assert len({r["container"] for r in ranks}) == 3, ranks
    assert {r["rank"]: r["task"] for r in ranks}[0] == "master:0", ranks
    assert f"{out}/checkpoint.pt" in webhdfs().find(out)


def test_the_minimal_example_of_the_pytorch_page_runs_as_written(local_cluster, rm, tmp_path):
    """Issue #53 item 6: docs/pytorch.md's own `train.py` and command, taken from the page, on YARN."""
    import re

    page = (ROOT / "docs" / "pytorch.md").read_text()
    (tmp_path / "train.py").write_text(re.search(r"```python\n(# train.py\n.*?)```", page, re.S).group(1))
    command = re.search(r"```bash\n(ytf-submit -r worker:2 --framework pytorch -s train.py .*?)```", page, re.S)
    argv = command.group(1).replace("\\\n", " ").split()  # type: ignore[union-attr]
    assert argv[:7] == ["ytf-submit", "-r", "worker:2", "--framework", "pytorch", "-s", "train.py"], argv
    out = "/tmp/e2e/torch-minimal"
    proc, app_id = ytf_submit("-r", "worker:2", "--framework", "pytorch", "-s", str(tmp_path / "train.py"),
                              "-o", f"hdfs://{out}", "--follow", "python3 ${DTF_TASK_SCRIPT}", timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"^\[worker:0\] rank 0 of 2: loss \d+\.\d+$", proc.stdout, re.M), proc.stdout
    assert f"{out}/model.pt" in webhdfs().find(out)
    assert rm.application(app_id).name == "pytorch"  # item 4: named by its framework


def test_the_torchrun_dag_runs_two_processes_in_each_of_two_containers_a_world_of_four(local_cluster, rm,
                                                                                         airflow_env):
    """dags_examples/tony_torch.py: the operator's framework="pytorch", nproc_per_node=2; the command is the
    torchrun command typed by hand, the executors gave it its settings (PET_*): local ranks 0-1 in each
    container, global rank 0 in worker 0's (the chief's) container, whose output reached HDFS."""
    summary, log = run_dag(airflow_env, ROOT / "dags_examples" / "tony_torch.py", "tony_torch")
    assert summary["state"] == "success", log[-4000:]
    metrics = summary["xcoms"]["report"]["return_value"]
    ranks = sorted(metrics["ranks"], key=lambda r: r["rank"])
    assert metrics["world_size"] == 4 and [r["rank"] for r in ranks] == [0, 1, 2, 3]
    by_container: dict[str, list[int]] = {}
    for r in ranks:
        by_container.setdefault(r["container"], []).append(r["local_rank"])
    assert sorted(by_container.values()) == [[0, 1], [0, 1]], ranks
    assert [r["node_rank"] for r in ranks] == [0, 0, 1, 1]
    assert [r["task"] for r in ranks] == ["worker:0", "worker:0", "worker:1", "worker:1"], ranks
    assert len({r["parameters"] for r in ranks}) == 1, ranks
    assert metrics["test_accuracy"] > 0.8, metrics


def test_a_program_written_for_tony_runs_unchanged(local_cluster, rm):
    """TonY's PyTorchRuntime names: INIT_METHOD=tcp://<rank 0>, RANK, WORLD. 1.5 GiB: PyPI's torch (the CUDA
    build) with gloo took 865 MB of a 768 MB container in a fresh-clone run."""
    proc, app_id = ytf_submit("-r", "worker:3", "--framework", "pytorch", "-m", "1536",
                              "-s", str(PAYLOADS / "tony_style_torch.py"), "python3 ${DTF_TASK_SCRIPT}",
                              timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    logs = aggregated_logs(rm, app_id)
    assert sorted(line.split()[2] for line in logs.splitlines() if line.startswith("tony-style OK")) == \
        ["0", "1", "2"], logs[-3000:]


def test_an_elastic_job_replaces_a_killed_worker_and_the_others_keep_running(local_cluster, rm, monkeypatch):
    """--elastic 1:2 --spares 1 (issue 54): worker:1's container SIGKILLed mid-training (every process of it, as
    a lost host or YARN's kill would) -> the spare, up and waiting since the start, takes its place and a new
    spare is asked for and comes up; the master's and worker 0's containers keep theirs, the group re-forms,
    the training resumes from rank 0's checkpoint and the job SUCCEEDS in its one attempt. A deferred Airflow
    sensor watches it: the lost and the replaced worker are in its task's log. (The no-spare path: the
    elastic tests of test_output_by_writer.py and test_secure_hosts.py.)"""
    out = "/tmp/e2e/torch-elastic"
    monkeypatch.setenv("AIRFLOW_CONN_YARN_DEFAULT", "")  # the watcher sets it; restored after the test
    watched: dict = {}
    watchers: list[threading.Thread] = []

    def watch(app_id: str) -> None:
        watchers.append(threading.Thread(target=watch_with_a_deferred_sensor, args=(app_id, local_cluster, watched),
                                         daemon=True))
        watchers[0].start()

    killed = torch_elastic.run_and_kill_a_worker(out, "torch-elastic", *torch_elastic.ONE_SPARE, on_submitted=watch)
    assert killed.returncode == 0, killed.stderr[-3000:]
    app_id = killed.app_id
    report = rm.application(app_id)
    assert report.final_status == "SUCCEEDED", report.diagnostics
    job = load_by_id(HistoryStore.open(), app_id, rm=rm)
    assert len(job.attempts) == 1, [a.reason for a in job.attempts]
    assert len(job.attempts[0].replaced) == 1 and "replaced by spare on" in job.attempts[0].replaced[0], \
        job.attempts[0].replaced
    by_task = _containers_by_task(killed.events)
    assert len(by_task["master:0"]) == 1 and len(by_task["worker:0"]) == 1, by_task  # they kept their containers
    assert len(by_task["worker:1"]) == 2 and by_task["worker:1"][0] == killed.container != by_task["worker:1"][1], \
        by_task
    spares_asked = [e["spare"] for e in killed.events if e["event"] == "SPARE_REQUESTED"]
    spares_up = {e["container_id"]: e["spare"] for e in killed.events if e["event"] == "SPARE_WAITING"}
    assert spares_asked == ["spare-1", "spare-2"], spares_asked  # one at the start, a new one after the place taken
    assert spares_up.get(by_task["worker:1"][1]) == "spare-1", (spares_up, by_task)  # the spare became worker:1
    assert "spare-2" in spares_up.values(), spares_up  # ... and the new spare came up and waited until the end
    assert not [e for e in killed.events if e["event"] == "SPARE_LOST"], killed.events
    replaced, stepping = torch_elastic.recovery_seconds(killed, aggregated_logs(rm, app_id))
    record("elastic, 1 spare: worker container SIGKILLed -> the spare running as it", replaced)
    record("elastic, 1 spare: worker container SIGKILLed -> training stepping again", stepping)
    record("elastic, 1 spare: worker container SIGKILLed -> the next epoch line",
           torch_elastic.epoch_line_seconds(killed, aggregated_logs(rm, app_id)))
    metrics = _metrics(out)
    # the group re-formed and every rank loaded rank 0's checkpoint: torchelastic counts a restart only when its
    # own workers failed, not when it restarts them for a node that joined (the kill between two collectives)
    assert metrics["resumed_at_epoch"] > 0, metrics
    assert metrics["world_size"] == 3 and len({r["parameters"] for r in metrics["ranks"]}) == 1, metrics
    assert {r["rank"]: r["task"] for r in metrics["ranks"]}[0] == "master:0", metrics["ranks"]
    assert "worker:1 lost on" in killed.stderr and "replaced by spare on" in killed.stderr, killed.stderr[-3000:]
    watchers[0].join(timeout=120)
    assert watched.get("event", {}).get("status") == "success", watched
    deferred_log = "\n".join(watched["log"])
    assert "worker:1 lost on" in deferred_log and "replaced by spare on" in deferred_log, deferred_log[-3000:]


def _containers_by_task(events: list[dict]) -> dict[str, list[str]]:
    """Each task's containers, in the order they registered."""
    by_task: dict[str, list[str]] = {}
    for e in events:
        if e["event"] == "TASK_REGISTERED":
            by_task.setdefault(e["task"], []).append(e["container_id"])
    return by_task
