"""The foundation: a real YARN and HDFS, reachable through skein, REST and WebHDFS."""

from __future__ import annotations

import os

import skein

from tests.e2e.helpers import aggregated_logs, wait_terminal
from tony_airflow.local.cluster import LocalCluster
from tony_airflow.local.cluster.cluster import DAEMONS
from tony_airflow.yarn.hdfs import webhdfs
from tony_airflow.yarn.rest import ResourceManagerClient


def test_four_daemons_are_separate_java_processes(local_cluster: LocalCluster):
    pids = local_cluster.running()  # the session cluster also has the GPU NodeManager
    assert set(pids) == {d.name for d in DAEMONS} | {"nodemanager-gpu"}
    assert all(pids.values()) and len(set(pids.values())) == 5
    for daemon in local_cluster.daemons:
        cmdline = open(f"/proc/{pids[daemon.name]}/cmdline", "rb").read().split(b"\0")
        assert cmdline[0].endswith(b"/java") and daemon.main_class.encode() in cmdline
    assert local_cluster.is_ready()


def test_up_is_idempotent(local_cluster: LocalCluster):
    before = local_cluster.running()
    local_cluster.up()
    assert local_cluster.running() == before


def test_skein_application_with_two_containers(local_cluster: LocalCluster, rm: ResourceManagerClient):
    spec = skein.ApplicationSpec(
        name="foundation-probe",
        services={"hello": skein.Service(
            instances=2,
            resources=skein.Resources(memory="256 MiB", vcores=1),
            script='echo "hello from $CONTAINER_ID"',
        )},
    )
    with skein.Client() as client:
        app_id = client.submit(spec)
    report = wait_terminal(rm, app_id)
    assert (report.state, report.final_status) == ("FINISHED", "SUCCEEDED"), report.diagnostics

    # The RM REST API reports the same application with its state and final status.
    listed = {a.id: a for a in rm.applications()}
    assert listed[app_id].final_status == "SUCCEEDED"

    # Container output is readable afterwards from the logs aggregated into HDFS.
    logs = aggregated_logs(rm, app_id)
    assert logs.count("hello from container_") == 2


def test_hdfs_roundtrip_with_the_python_client(local_cluster: LocalCluster):
    fs = webhdfs()
    payload = os.urandom(3 * 1024 * 1024 + 17)
    fs.makedirs("/tmp/foundation", exist_ok=True)
    with fs.open("/tmp/foundation/blob.bin", "wb") as fh:
        fh.write(payload)
    assert fs.cat("/tmp/foundation/blob.bin") == payload
    assert fs.info("/tmp/foundation/blob.bin")["size"] == len(payload)
    fs.rm("/tmp/foundation", recursive=True)
