"""PyTorch's task environment (issue #42): torchrun's settings as its own PET_* variables, several processes
per container, and what cannot run refused at submission."""

from __future__ import annotations

import pytest

from tests.unit.core.test_spec_hardening import _refuse
from tony_airflow.cli import submit
from tony_airflow.core.runtimes import TaskIdentity, task_env
from tony_airflow.core.spec import build_job_spec
from tony_airflow.errors import UsageError

HOSTS = {"master": ["m:9"], "worker": ["a:10", "b:11"]}


def _env(type_: str, index: int, **opts) -> dict[str, str]:
    job = build_job_spec({"cluster_requirement": "master:1,worker:2", "command": "torchrun train.py",
                          "framework": "pytorch", **opts})
    return task_env(job, HOSTS, TaskIdentity(type_, index, 3, "application_1_0007"))


def test_torchrun_reads_the_whole_rendezvous_from_its_own_environment_variables():
    env = _env("worker", 1, nproc_per_node="worker:2", task_vcores="4")
    assert {k: v for k, v in env.items() if k.startswith("PET_")} == {
        "PET_NNODES": "3", "PET_NODE_RANK": "2", "PET_NPROC_PER_NODE": "2",
        "PET_RDZV_BACKEND": "static", "PET_RDZV_ENDPOINT": "m:9", "PET_MASTER_ADDR": "m", "PET_MASTER_PORT": "9",
        "PET_RDZV_ID": "application_1_0007-3", "PET_MAX_RESTARTS": "0"}
    assert env["OMP_NUM_THREADS"] == "2"  # 4 vcores shared by 2 processes (torchrun's own default is 1)
    master = _env("master", 0, nproc_per_node="worker:2")
    # the master's container is node rank 0: global rank 0, where programs save, is in the chief's container
    assert (master["PET_NODE_RANK"], master["PET_NPROC_PER_NODE"], master["IS_CHIEF"]) == ("0", "1", "true")


def test_a_plain_python_command_keeps_one_process_per_container_with_the_env_names():
    env = _env("worker", 0)
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"]) == \
        ("m", "9", "1", "3", "0")
    assert env["OMP_NUM_THREADS"] == "1"


def test_the_jobs_own_omp_num_threads_wins():
    assert "OMP_NUM_THREADS" not in _env("worker", 0, env={"OMP_NUM_THREADS": "7"})


def test_nproc_per_node_in_every_front_end_form():
    job = build_job_spec({"tasks": {"master": 1, "worker": {"instances": 2, "nproc_per_node": 4}}, "command": "x",
                          "framework": "pytorch", "nproc_per_node": "2"})
    assert (job.tasks["master"].nproc_per_node, job.tasks["worker"].nproc_per_node) == (2, 4)
    args = submit.build_parser().parse_args(["-r", "worker:2", "--framework", "pytorch", "--nproc_per_node", "3",
                                             "torchrun t.py"])
    assert submit.job_from_args(args).tasks["worker"].nproc_per_node == 3


def test_one_process_per_gpu_at_most():
    job = build_job_spec({"cluster_requirement": "worker:2", "command": "x", "framework": "pytorch",
                          "task_gpus": "2", "nproc_per_node": "2"})
    assert job.tasks["worker"].nproc_per_node == 2
    with pytest.raises(UsageError, match=r"^nproc_per_node: worker:3 — its containers have 2 GPU\(s\), one per "
                                         r"process; allowed: at most 2$"):
        build_job_spec({"cluster_requirement": "worker:2", "command": "x", "framework": "pytorch",
                        "task_gpus": "2", "nproc_per_node": "3"})


@pytest.mark.parametrize("argv, expected", [
    (["--framework", "pytorch", "--nproc_per_node", "0"],
     "nproc_per_node: 0 is too small; allowed: a whole number from 1 to 64"),
    (["--framework", "pytorch", "--nproc_per_node", "worker:65"],
     "nproc_per_node: 65 is too large; allowed: at most 64"),
    (["--framework", "pytorch", "--nproc_per_node", "ps:2"], "nproc_per_node: names unknown type 'ps'"),
    (["--framework", "pytorch", "--nproc_per_node", "worker[0]:2"],
     "nproc_per_node: worker[0] — the per-task form is only for task_memory and task_vcores"),
    (["--nproc_per_node", "2"], "nproc_per_node: worker:2 — several processes per container are started by "
                                "torchrun; allowed: 1 for framework tensorflow, or --framework pytorch"),
])
def test_a_bad_nproc_per_node_is_refused_in_one_line_and_nothing_is_submitted(argv, expected, capsys, monkeypatch):
    line = _refuse(["-r", "worker:2", *argv, "torchrun t.py"], capsys, monkeypatch)
    assert line.startswith(f"error: {expected}"), line
