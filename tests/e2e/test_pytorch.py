"""Real PyTorch (PyPI's torch, gloo on CPU) on the local YARN (issue #42): DDP training of the digits example
into HDFS, torchrun with several processes per container (as a DAG node), and a program written for TonY."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.e2e.helpers import PAYLOADS, aggregated_logs, run_dag, ytf_submit
from tony_airflow.cli.dag_test import local_yarn_connection
from tony_airflow.yarn.hdfs import webhdfs

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]


def _metrics(path: str) -> dict:
    return json.loads(webhdfs().cat(f"{path}/metrics.json"))


def test_a_master_and_two_workers_train_the_digits_with_ddp_into_hdfs(local_cluster, rm):
    """One process per container (`python -m …`): torch's env:// names; every rank ends with the same
    parameters, rank 0 (the master) saved its checkpoint into the job's output in HDFS."""
    out = "/tmp/e2e/torch-ddp"
    proc, app_id = ytf_submit("-r", "master:1,worker:2", "--framework", "pytorch", "-m", "1024",
                              "-o", f"hdfs://{out}", "-n", "torch-ddp",
                              "python3 -m tony_airflow.examples.digits_torch --epochs 6", timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = _metrics(out)
    assert metrics["test_accuracy"] > 0.9, metrics
    ranks = metrics["ranks"]
    assert sorted(r["rank"] for r in ranks) == [0, 1, 2] and {r["world_size"] for r in ranks} == {3}
    assert len({r["parameters"] for r in ranks}) == 1, ranks  # DDP: identical parameters on every rank
    assert len({r["container"] for r in ranks}) == 3, ranks
    assert {r["rank"]: r["task"] for r in ranks}[0] == "master:0", ranks
    assert f"{out}/checkpoint.pt" in webhdfs().find(out)


@pytest.fixture(scope="module")
def airflow_env(local_cluster, tmp_path_factory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("airflow-torch")
    return {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW_CONN_YARN_DEFAULT": local_yarn_connection(local_cluster)}


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
    """TonY's PyTorchRuntime names: INIT_METHOD=tcp://<rank 0>, RANK, WORLD."""
    proc, app_id = ytf_submit("-r", "worker:3", "--framework", "pytorch", "-m", "768",
                              "-s", str(PAYLOADS / "tony_style_torch.py"), "python3 ${DTF_TASK_SCRIPT}",
                              timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    logs = aggregated_logs(rm, app_id)
    assert sorted(line.split()[2] for line in logs.splitlines() if line.startswith("tony-style OK")) == \
        ["0", "1", "2"], logs[-3000:]
