"""GPUs and node labels on the session cluster's second NodeManager (label `gpu`, 2 GPUs).

The GPUs are advertised by YARN's own GPU plugin through a discovery executable;
there is no GPU on this machine, so what is checked is scheduling and the
CUDA_VISIBLE_DEVICES each task is given.
"""

from __future__ import annotations

import re

from tests.e2e.helpers import PAYLOADS, aggregated_logs, ytf_submit


def test_one_gpu_per_worker_on_the_gpu_node(local_cluster, rm):
    gpu_port = local_cluster.settings.ports["gpu:yarn.nodemanager.address"]
    proc, app_id = ytf_submit("-r", "ps:1,worker:2", "-m", "384", "--task_gpus", "worker:1",
                              "--node_label", "worker:gpu", "-s", str(PAYLOADS / "gpu_env.py"),
                              "python3 ${DTF_TASK_SCRIPT}")
    assert proc.returncode == 0, proc.stderr
    found = dict(re.findall(r"^(\w+:\d) (nm_port=\d+ cuda=\S*)$", aggregated_logs(rm, app_id), re.M))
    assert found["worker:0"].startswith(f"nm_port={gpu_port} ")
    assert found["worker:1"].startswith(f"nm_port={gpu_port} ")
    assert {found["worker:0"].split("cuda=")[1], found["worker:1"].split("cuda=")[1]} == {"0", "1"}
    assert not found["ps:0"].startswith(f"nm_port={gpu_port} ")  # ps anywhere but the gpu partition
    assert found["ps:0"].endswith("cuda=")  # and it sees no GPU


def test_more_gpus_than_a_node_has_is_refused(local_cluster, rm):
    before = len(rm.applications())
    proc, app_id = ytf_submit("-r", "worker:1", "--task_gpus", "worker:3", "--node_label", "worker:gpu", "true")
    assert proc.returncode == 2 and app_id is None
    assert proc.stderr.strip() == "error: task_gpus: worker asks 3 GPU(s) per task; the largest node has 2"
    proc, _ = ytf_submit("-r", "worker:1", "--node_label", "worker:tpu", "true")
    assert proc.returncode == 2 and "node_label: worker asks label 'tpu'; allowed: gpu" in proc.stderr
    assert len(rm.applications()) == before


def test_the_am_runs_on_the_node_its_label_names_and_an_unknown_label_is_refused(local_cluster, rm):
    """`--am_node_label` (#41 item 3): the AM's container in a partition of the user's choosing (off the GPU
    nodes, or on the ones it is allowed); the tasks stay where their own labels say."""
    gpu_port = local_cluster.settings.ports["gpu:yarn.nodemanager.address"]
    proc, app_id = ytf_submit("-r", "worker:1", "-m", "384", "--am_node_label", "gpu", "true")
    assert proc.returncode == 0, proc.stderr
    app = rm.get(f"/ws/v1/cluster/apps/{app_id}")["app"]
    assert app["amNodeLabelExpression"] == "gpu" and app["masterNodeId"].endswith(f":{gpu_port}"), app
    proc, app_id = ytf_submit("-r", "worker:1", "--am_node_label", "tpu", "true")
    assert proc.returncode == 2 and app_id is None
    assert proc.stderr.strip() == "error: am_node_label: the AM asks label 'tpu'; allowed: gpu"
