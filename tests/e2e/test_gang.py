"""Gangs on a shared queue (#41), on the real local cluster: no deadlock between gangs, and why one waits.

The session's cluster has one 16 GiB node for unlabelled containers. A gang here is 6 workers of 1700 MiB
(~65% of it with its AM): two never fit together. On a queue with fair ordering, YARN hands each gang a
share and, without the wait-die rule (core/am/gang.py), each held 4 of its 6 and both waited for ever.
The queue's settings are changed for these tests only, by the RM's own `-refreshQueues`, and put back.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.e2e.helpers import record, wait_terminal, ytf_submit
from tony_airflow.local.cluster import LocalCluster
from tony_airflow.yarn.hdfs import webhdfs

BIN = Path(sys.executable).parent
GANG = ["-r", "worker:6", "-m", "1700", "--max-attempts", "1"]
QUEUE = "yarn.scheduler.capacity.root.default"


@contextmanager
def queue_settings(cluster: LocalCluster, **settings: object):
    """The default queue with `settings` (capacity-scheduler keys after `root.default.`), then as before."""
    path = cluster.conf_dir / "capacity-scheduler.xml"
    before = path.read_text()
    extra = "".join(f"  <property>\n    <name>{QUEUE}.{key.replace('_', '-')}</name>\n    <value>{value}</value>\n"
                    "  </property>\n" for key, value in settings.items())
    path.write_text(before.replace("</configuration>", extra + "</configuration>"))
    subprocess.run(["yarn", "rmadmin", "-refreshQueues"], check=True, capture_output=True, timeout=120)
    try:
        yield
    finally:
        path.write_text(before)
        subprocess.run(["yarn", "rmadmin", "-refreshQueues"], check=True, capture_output=True, timeout=120)


def _events(app_id: str) -> list[dict]:
    text = webhdfs().cat(f"/tmp/tony-history/{app_id}/events.jsonl").decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _submit(name: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "ytf-submit"), *GANG, "-n", name, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("gangs", [2, 3])
def test_gangs_that_cannot_run_together_all_succeed_one_after_the_other_on_a_fair_queue(local_cluster, rm, gangs):
    with queue_settings(local_cluster, ordering_policy="fair"):
        started = time.monotonic()
        procs = [_submit(f"gang-{i}", "--env", "SLEEP_S=10", "sleep ${SLEEP_S}") for i in range(gangs)]
        results = [p.communicate(timeout=600) for p in procs]
        wall = time.monotonic() - started
    for proc, (out, err) in zip(procs, results):
        assert proc.returncode == 0, (out[-2000:], err[-3000:])
    ids = [next(w for w in out.split() if w.startswith("application_")) for out, _ in results]
    histories = {app_id: _events(app_id) for app_id in ids}
    runs = []
    for app_id, events in histories.items():
        started_at = min(e["time"] for e in events if e["event"] == "TASK_STARTED")
        ended_at = max(e["time"] for e in events if e["event"] == "TASK_FINISHED")
        runs.append((started_at, ended_at, app_id))
    runs.sort()
    for (_, end, first), (start, _, second) in zip(runs, runs[1:]):
        assert start >= end - 1.0, f"{first} and {second} ran together: {runs}"  # one after the other
    releases = [e for events in histories.values() for e in events if e["event"] == "GANG_RELEASED"]
    assert releases, "no gang gave way: the queue did not split the cluster between them"
    # only a younger gang gives way, to an older one; age is the RM's submission time (then the id): three
    # clients submitting at once may be accepted in another order than their ids were handed out
    age = {a: (rm.get(f"/ws/v1/cluster/apps/{a}")["app"]["startedTime"], a) for a in ids}
    for e in releases:
        younger = next(a for a, events in histories.items() if e in events)
        assert e["older"] in ids and age[e["older"]] < age[younger], (e, age)
    waits = [line for _, err in results for line in err.splitlines() if "· waiting for " in line]
    assert any("released its containers for the older gang" in line for line in waits), waits
    assert all("allocation timeout" not in err for _, err in results)
    record(f"{gangs} gangs of 6x1700 MiB on a fair queue, submitted together: wall", wall)
    record(f"{gangs} gangs on a fair queue: sum of their run times",
           sum(end - start for start, end, _ in runs))


def test_a_queue_at_its_maximum_capacity_is_named_while_the_gang_waits_and_when_it_times_out(local_cluster, rm):
    with queue_settings(local_cluster, maximum_capacity=50):
        proc, app_id = ytf_submit(*GANG, "-n", "capped", "--allocation-timeout", "25", "sleep 1", timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    reason = "queue default is at its maximum capacity (50% of the cluster"
    assert any("· waiting for 2 of 6 worker containers" in line and reason in line
               for line in proc.stderr.splitlines()), proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "allocation timeout" in last and reason in last, last
    assert any(e["event"] == "GANG_WAITING" and reason in e["reason"] for e in _events(app_id))


def test_an_application_held_by_the_queues_am_limit_says_so_in_tony_status(local_cluster, rm):
    with queue_settings(local_cluster, maximum_am_resource_percent=0.01):
        first, first_id = ytf_submit("-r", "worker:1", "--no-wait", "-n", "holds-the-am-limit", "sleep 120")
        second, second_id = ytf_submit("-r", "worker:1", "--no-wait", "-n", "held", "sleep 1")
        try:
            assert first.returncode == 0 and second.returncode == 0, (first.stderr, second.stderr)
            deadline, status = time.monotonic() + 60, ""
            while time.monotonic() < deadline and "AM resource limit" not in status:
                status = subprocess.run([str(BIN / "tony"), "status", str(second_id)], capture_output=True,
                                        text=True, timeout=60).stdout
                time.sleep(1)
            line = next((x for x in status.splitlines() if "· waiting for its AM container" in x), status)
            assert line == f"{second_id} ACCEPTED · waiting for its AM container: Queue's AM resource limit " \
                           "exceeded", status
        finally:
            for app_id in (first_id, second_id):
                if app_id:
                    subprocess.run([str(BIN / "tony"), "kill", app_id], capture_output=True, timeout=120)
                    wait_terminal(rm, app_id, timeout=120)


def test_a_gang_bigger_than_the_cluster_is_still_refused_at_submission(local_cluster, rm):
    before = {a.id for a in rm.applications()}
    proc, app_id = ytf_submit("-r", "worker:10", "-m", "1700", "-n", "too-big", "sleep 1", timeout=120)
    assert proc.returncode == 2 and app_id is None, (proc.stdout, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error: "), proc.stderr
    assert {a.id for a in rm.applications()} == before  # nothing submitted
