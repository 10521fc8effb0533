"""`--spread TYPE` (#41 item 3): one task of the type per host, by naming hosts with strict locality."""

from __future__ import annotations

import dataclasses

import pytest

from tony_airflow.cli.submit import build_parser, options_from_args
from tony_airflow.core.client import _spread_hosts, build_application
from tony_airflow.core.placement import initial_container_ids, service_host, service_names, spread_services
from tony_airflow.core.spec import build_job_spec
from tony_airflow.errors import UsageError

NODES = [{"nodeHostName": h, "state": "RUNNING", "nodeLabels": None} for h in ("h1", "h2", "h3")] + [
    {"nodeHostName": "gpu1", "state": "RUNNING", "nodeLabels": ["gpu"]},
    {"nodeHostName": "h4", "state": "LOST", "nodeLabels": None}]


def _job(**opts):
    return build_job_spec({"cluster_requirement": "ps:1,worker:3", "command": "train", **opts}, check_paths=False)


def test_the_command_line_and_the_job_file_name_the_spread_types_and_the_ams_label():
    args = build_parser().parse_args(["-r", "worker:2", "--spread", "worker", "--am_node_label", "cpu", "x"])
    job = build_job_spec(options_from_args(args), check_paths=False)
    assert job.spread == ["worker"] and job.am_node_label == "cpu"
    assert _job(spread="worker,ps").spread == ["worker", "ps"]


@pytest.mark.parametrize("opts, message", [
    ({"spread": "chief"}, "spread: names unknown type 'chief'; allowed: ps, worker"),
    ({"spread": "worker", "task_memory": ["worker[0]:4096"]}, "spread: worker has per-task memory or vcores"),
    ({"spread": "worker", "node_label": "worker:gpu"}, "spread: worker has node_label 'gpu'"),
])
def test_what_spread_cannot_do_is_refused_in_one_line(opts, message):
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("(", r"\(")):
        _job(**opts)


def test_the_hosts_are_the_running_hosts_of_the_default_partition_and_too_few_are_refused():
    assert _spread_hosts(_job(spread="worker"), NODES) == {"worker": ["h1", "h2", "h3"]}
    many = build_job_spec({"cluster_requirement": "worker:4", "command": "x", "spread": "worker"}, check_paths=False)
    with pytest.raises(UsageError, match=r"spread: worker asks 4 hosts, one per task; the cluster's default "
                                         r"partition has 3 running host\(s\); allowed: at most 3 worker tasks"):
        _spread_hosts(many, NODES)


def test_each_task_starts_on_its_own_host_and_asks_for_it_only(tmp_path):
    job = dataclasses.replace(_job(spread="worker"), spread_hosts={"worker": ["h1", "h2", "h3"]})
    assert {n for n in service_names(job)} == {"ps", "worker-on-0", "worker-on-1", "worker-on-2"}
    assert initial_container_ids(job) == {"ps_0": ("ps", 0), "worker-on-0_0": ("worker", 0),
                                          "worker-on-1_0": ("worker", 1), "worker-on-2_0": ("worker", 2)}
    spec = build_application(job, tmp_path, "secret")
    on = {name: (s.nodes, s.relax_locality, s.instances) for name, s in spec.services.items()}
    assert on["worker-on-1"] == (["h2"], False, 1) and on["ps"] == ([], True, 1)
    assert service_host(job, "worker-on-2") == "h3" and service_host(job, "ps") == ""


def test_a_later_request_keeps_free_hosts_and_puts_lost_ones_last():
    job = dataclasses.replace(_job(spread="worker"), spread_hosts={"worker": ["h1", "h2", "h3", "h4"]})
    assert spread_services(job, "worker", [0, 1, 2], set(), set()) == {
        0: "worker-on-0", 1: "worker-on-1", 2: "worker-on-2"}
    assert spread_services(job, "worker", [0, 1, 2], set(), {"h2"}) == {
        0: "worker-on-0", 1: "worker-on-3", 2: "worker-on-2"}
    assert spread_services(job, "worker", [1], {"h1", "h3"}, set()) == {1: "worker-on-1"}
    with pytest.raises(KeyError):
        spread_services(job, "worker", [0, 1], {"h1", "h2", "h3"}, set())


def test_the_ams_label_goes_to_skeins_application_spec(tmp_path):
    spec = build_application(_job(am_node_label="cpu"), tmp_path, "secret")
    assert spec.node_label == "cpu"
