"""Client mode: the submitting process joins the cluster as the chief; workers run on YARN."""

from __future__ import annotations

from tests.e2e.helpers import PAYLOADS, aggregated_logs, ytf_submit


def test_chief_runs_in_the_submitting_process(local_cluster, rm):
    proc, app_id = ytf_submit("--client", "-r", "worker:2", "-m", "384", "-s", str(PAYLOADS / "client_mode.py"),
                              "python3 ${DTF_TASK_SCRIPT}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "chief:0 runs in the client" in proc.stdout  # printed by this very process tree
    assert rm.application(app_id).final_status == "SUCCEEDED"
    logs = aggregated_logs(rm, app_id)
    assert "worker:0 runs in the container" in logs and "worker:1 runs in the container" in logs
    assert "chief:0" not in logs


def test_client_mode_refuses_no_wait(local_cluster):
    proc, app_id = ytf_submit("--client", "--no-wait", "-r", "worker:1", "true")
    assert proc.returncode == 2 and app_id is None
    assert "client: --client runs the chief in this process" in proc.stderr
