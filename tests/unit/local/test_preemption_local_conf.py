"""`tony cluster up --preemption`: two queues and YARN's preemption monitor, as configuration (#29 item 4)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from tony_airflow.local.cluster.config import ClusterSettings, capacity_scheduler, cluster_labels, write_conf
from tony_airflow.yarn.hadoop_conf import HadoopConf


def _site(path: Path) -> dict[str, str]:
    return {p.findtext("name"): p.findtext("value") for p in ET.parse(path).getroot().iter("property")}


def test_preemption_gives_two_half_queues_that_may_use_everything_and_the_monitor(tmp_path: Path):
    settings = ClusterSettings.choose()
    settings.preemption = True
    write_conf(tmp_path / "conf", tmp_path, tmp_path / "jars", settings, container_path="/usr/bin")
    queues = _site(tmp_path / "conf" / "capacity-scheduler.xml")
    assert queues["yarn.scheduler.capacity.root.queues"] == "default,high"
    for queue in ("default", "high"):
        assert queues[f"yarn.scheduler.capacity.root.{queue}.capacity"] == "50"
        assert queues[f"yarn.scheduler.capacity.root.{queue}.maximum-capacity"] == "100"
        assert queues[f"yarn.scheduler.capacity.root.{queue}.user-limit-factor"] == "2"
    yarn = HadoopConf.load(tmp_path / "conf")
    assert yarn.get("yarn.resourcemanager.scheduler.monitor.enable") == "true"
    assert yarn.get("yarn.resourcemanager.scheduler.monitor.policies").endswith(".ProportionalCapacityPreemptionPolicy")


def test_without_preemption_one_queue_has_everything_and_no_monitor(tmp_path: Path):
    settings = ClusterSettings.choose()
    write_conf(tmp_path / "conf", tmp_path, tmp_path / "jars", settings, container_path="/usr/bin")
    queues = _site(tmp_path / "conf" / "capacity-scheduler.xml")
    assert queues["yarn.scheduler.capacity.root.queues"] == "default"
    assert queues["yarn.scheduler.capacity.root.default.capacity"] == "100"
    assert HadoopConf.load(tmp_path / "conf").get("yarn.resourcemanager.scheduler.monitor.enable") is None


def test_the_gpu_label_belongs_to_the_first_queue():
    conf = capacity_scheduler(ClusterSettings(ports={}, preemption=True, gpus=2))
    assert conf["yarn.scheduler.capacity.root.default.accessible-node-labels.gpu.capacity"] == 100
    assert conf["yarn.scheduler.capacity.root.high.accessible-node-labels.gpu.capacity"] == 0


def test_a_many_host_cluster_has_a_non_exclusive_am_partition_and_one_host_has_none():
    many = ClusterSettings(ports={}, nodes=3, net_slot=0)
    assert cluster_labels(many) == {"am": False}
    conf = capacity_scheduler(many)
    assert conf["yarn.scheduler.capacity.root.accessible-node-labels.am.capacity"] == 100
    assert conf["yarn.scheduler.capacity.root.default.accessible-node-labels.am.capacity"] == 100
    assert cluster_labels(ClusterSettings(ports={})) == {}
    assert cluster_labels(ClusterSettings(ports={}, gpus=1)) == {"gpu": True}
