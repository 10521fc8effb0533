"""Shared helpers for end-to-end tests: run the real entry points, read real logs."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tony_airflow.local.cluster import LocalCluster
from tony_airflow.local.cluster.config import host_dirs
from tony_airflow.local.cluster.network import Host
from tony_airflow.local.cluster.processes import container_processes
from tony_airflow.yarn.rest import ApplicationReport, ResourceManagerClient

PAYLOADS = Path(__file__).resolve().parent.parent / "payloads"
MEASUREMENTS = Path(__file__).resolve().parents[2] / "artifacts" / "measurements.jsonl"


@contextlib.contextmanager
def krb5_config(path: Path) -> Iterator[None]:
    """KRB5_CONFIG names a secure cluster's realm for the whole process while the cluster serves its tests
    (gssapi reads it per call); what was there comes back after."""
    saved = os.environ.get("KRB5_CONFIG")
    os.environ["KRB5_CONFIG"] = str(path)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("KRB5_CONFIG", None)
        else:
            os.environ["KRB5_CONFIG"] = saved


def record(name: str, seconds: float) -> None:
    """Keep a figure a test measured (artifacts/measurements.jsonl): reported, never asserted on time."""
    MEASUREMENTS.parent.mkdir(exist_ok=True)
    with MEASUREMENTS.open("a") as out:
        out.write(json.dumps({"name": name, "seconds": round(seconds, 2), "at": time.time()}) + "\n")
BIN = Path(sys.executable).parent


def as_from_a_terminal() -> None:
    """`preexec_fn` of a process a test plays a user's Ctrl-C on: SIGINT (and SIGQUIT) at their default, as a
    terminal's shell starts a command, whatever this test process inherited. A suite run as a background job
    (`make test > log 2>&1 &`, nohup, many CI runners) starts with SIGINT ignored, every child inherits that,
    and the product rightly keeps an inherited SIG_IGN (core/runner.py): the played Ctrl-C did nothing, the
    test timed out and left its application RUNNING (issue #51 item 15)."""
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)


def ytf_submit(*args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess, str | None]:
    """Run the real `ytf-submit`; return the process and the application id it printed."""
    proc = subprocess.run([str(BIN / "ytf-submit"), *args], capture_output=True, text=True, timeout=timeout)
    match = re.search(r"Submitted application (application_\d+_\d+)", proc.stdout)
    return proc, match.group(1) if match else None


def wait_terminal(rm: ResourceManagerClient, app_id: str, timeout: float = 300) -> ApplicationReport:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        report = rm.application(app_id)
        if report.is_terminal:
            return report
        time.sleep(0.5)
    raise AssertionError(f"{app_id} not finished after {timeout}s")


def aggregated_logs(rm: ResourceManagerClient, app_id: str, timeout: float = 60) -> str:
    """The application's container logs, once aggregated into HDFS (read with Hadoop's LogsCLI)."""
    deadline = time.monotonic() + timeout
    while rm.get(f"/ws/v1/cluster/apps/{app_id}")["app"].get("logAggregationStatus") not in ("SUCCEEDED", "FAILED"):
        assert time.monotonic() < deadline, "log aggregation did not finish"
        time.sleep(0.5)
    return subprocess.run(["yarn", "logs", "-applicationId", app_id], capture_output=True, text=True,
                          check=True).stdout


def dag_command(dag_file: Path, dag_id: str) -> list[str]:
    """A DAG run by Airflow's dag.test() in a child process (tony_airflow.cli.dag_test)."""
    return [sys.executable, "-m", "tony_airflow.cli.dag_test", str(dag_file), dag_id]


def dag_summary(out: str) -> dict:
    from tony_airflow.cli.dag_test import SUMMARY_MARK

    lines = [line for line in out.splitlines() if line.startswith(SUMMARY_MARK)]
    assert lines, out[-3000:]
    return json.loads(lines[-1][len(SUMMARY_MARK):])


def run_dag(env: dict[str, str], dag_file: Path, dag_id: str, timeout: float = 600) -> tuple[dict, str]:
    proc = subprocess.run(dag_command(dag_file, dag_id), env=env, capture_output=True, text=True, timeout=timeout)
    return dag_summary(proc.stdout), proc.stdout + proc.stderr


def maven_driver(driver_dir: Path, *maven_args: str) -> list[str]:
    """Build a test driver's pom (Azkaban's or Oozie's classes from Maven Central); its jar + class path."""
    subprocess.run(["mvn", "-q", "-B", "-f", str(driver_dir / "pom.xml"), *maven_args, "package"], check=True,
                   timeout=600)
    jar = next((driver_dir / "target").glob("*-driver-*.jar"))
    return [str(jar), *(driver_dir / "target" / "classpath.txt").read_text().strip().split(":")]


def java_command(classpath: list[str], main_class: str, *args: str) -> tuple[list[str], dict[str, str]]:
    """A Java 17 command line with Hadoop's --add-opens, and an environment whose PATH finds our entry points."""
    from tony_airflow.yarn.jvm import ADD_OPENS, find_java_home

    java = str(Path(find_java_home()) / "bin" / "java")
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    return [java, *ADD_OPENS, "-cp", ":".join(classpath), main_class, *args], env


class _RecordedLog:
    """A trigger's logger that also keeps each line it logs: what the deferred task's log would hold."""

    def __init__(self, log, lines: list[str]) -> None:
        self._log, self._lines = log, lines

    def __getattr__(self, level: str):
        emit = getattr(self._log, level)

        def record(msg, *args, **kwargs):
            self._lines.append(str(msg) % args if args else str(msg))
            return emit(msg, *args, **kwargs)
        return record


def watch_with_a_deferred_sensor(app_id: str, cluster, result: dict) -> None:
    """An Airflow sensor, deferrable, watching the application through the local cluster's `yarn_default`
    (dag_test.local_yarn_connection): its trigger runs until its one event, into `result` (and the lines
    its trigger logged, as the task's log would hold them, into result["log"])."""
    import asyncio

    from airflow.exceptions import TaskDeferred

    from tony_airflow.cli.dag_test import local_yarn_connection
    from tony_airflow.providers.yarn.sensors.yarn import YarnApplicationSensor

    os.environ["AIRFLOW_CONN_YARN_DEFAULT"] = local_yarn_connection(cluster)
    sensor = YarnApplicationSensor(task_id="watch", application_id=app_id, deferrable=True, poke_interval=1)
    try:
        sensor.execute({})
        result["error"] = "the sensor did not defer"
        return
    except TaskDeferred as deferred:
        trigger = deferred.trigger

    async def first_event() -> dict:
        async for event in trigger.run():
            return event.payload
        return {}

    result["log"] = []
    trigger._log = _RecordedLog(trigger.log, result["log"])
    try:
        result["event"] = asyncio.run(first_event())
        result["value"] = sensor.execute_complete({}, result["event"])
    except Exception as exc:  # the test reads it
        result["error"] = repr(exc)


# ------------------------------------------------------------------ the hosts of a multi-host cluster
def containers_on(cluster: LocalCluster, host: Host) -> dict[int, str]:
    """pid -> YARN container id of every container process of the host's NodeManager."""
    return {p.pid: p.container_id for p in container_processes(host_dirs(cluster.state_dir, host)["nm-local"])}


def victim_host(cluster: LocalCluster, app_id: str) -> Host:
    """A host running a task of the application but not its AM (container 1): losing it loses a task."""
    network = cluster.network
    assert network
    app = app_id.split("_", 1)[1]
    candidates = []
    for host in network.hosts:
        ids = {cid for cid in containers_on(cluster, host).values() if app in cid}
        if ids and not any(cid.endswith("_000001") for cid in ids):
            candidates.append((host.number, host))
    assert candidates, f"no host runs a task of {app_id} without its AM"
    return min(candidates)[1]


def kill_host(cluster: LocalCluster, host: Host, datanode: bool = False) -> None:
    """SIGKILL the host's NodeManager and every container process on it, and its DataNode if asked."""
    daemons = [f"nodemanager-{host.name}", *([f"datanode-{host.name}"] if datanode else [])]
    pids = [cluster.pid(d) for d in cluster.daemons if d.name in daemons]
    assert len(pids) == len(daemons), [d.name for d in cluster.daemons]
    pids += list(containers_on(cluster, host))
    for pid in pids:
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # it ended between the listing and the kill (a run of the whole file
                pass                    # failed here, and the half-killed host failed the 5 tests after it)


def node_state(rm: ResourceManagerClient, host: Host) -> str:
    nodes = rm.get("/ws/v1/cluster/nodes", params={"states": "RUNNING,LOST,UNHEALTHY,SHUTDOWN,NEW"})
    states = [n["state"] for n in (nodes.get("nodes") or {}).get("node") or [] if n["nodeHostName"] == host.address]
    return states[0] if states else "absent"


def rejoin(cluster: LocalCluster, rm: ResourceManagerClient, host: Host) -> float:
    """Wait until the host is a RUNNING YARN node again and nothing of the job runs on it; seconds waited."""
    started = time.monotonic()
    deadline = started + 120
    while node_state(rm, host) != "RUNNING" or containers_on(cluster, host):
        assert time.monotonic() < deadline, (f"{host.address} did not rejoin: {node_state(rm, host)}, "
                                             f"{containers_on(cluster, host)}")
        time.sleep(0.5)
    return time.monotonic() - started


def hosts_idle(cluster: LocalCluster, rm: ResourceManagerClient, within: float = 120) -> None:
    """Wait until every host is a RUNNING YARN node with nothing allocated on it and no node label: a test that
    loses a host needs the room of the other two for its second attempt. CI's run of 502f139 saw a lost AM's
    second attempt wait 300 s for a worker's 2560 MiB after an earlier test of the module had failed; if the
    hosts are not idle, this says what is on them instead."""
    network = cluster.network
    assert network
    addresses = {h.address for h in network.hosts}
    deadline = time.monotonic() + within
    while True:
        nodes = (rm.get("/ws/v1/cluster/nodes").get("nodes") or {}).get("node") or []
        # (a host relabelled to the default partition reads nodeLabels [""]: no label)
        seen = {n["nodeHostName"]: (n["state"], n.get("usedMemoryMB", 0), [x for x in n.get("nodeLabels") or [] if x])
                for n in nodes if n["nodeHostName"] in addresses}
        busy = {a: s for a, s in seen.items() if s != ("RUNNING", 0, [])}
        if len(seen) == len(addresses) and not busy:
            return
        assert time.monotonic() < deadline, f"hosts not idle before the test: {seen}, apps: " + ", ".join(
            f"{a.id} {a.state} {a.name}" for a in rm.applications(states=("NEW", "SUBMITTED", "ACCEPTED", "RUNNING")))
        time.sleep(0.5)


def fresh_hdfs_dir(out: str) -> None:
    """An HDFS output directory as a test starts it: gone (an earlier run's files would be resumed from)."""
    from tony_airflow.yarn.hdfs import webhdfs

    fs = webhdfs()
    if fs.exists(out):
        fs.rm(out, recursive=True)


def job_events(app_id: str) -> list[dict]:
    """A finished job's history events, from its closed event log in HDFS."""
    from tony_airflow.yarn.hdfs import webhdfs

    text = webhdfs().cat(f"/tmp/tony-history/{app_id}/events.jsonl").decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _training_while_running(rm: ResourceManagerClient, stdout: Path, submit: subprocess.Popen) -> list[dict]:
    """The AM's status page's `training` (issue #52), read through the tracking URL every half second while
    the job runs, each with the page's `training_refused`."""
    import httpx

    from tony_airflow.core.protocol import STATUS_JSON, am_page_url

    seen: list[dict] = []
    app_id, deadline = None, time.monotonic() + 600
    while submit.poll() is None and time.monotonic() < deadline:
        if app_id is None and (found := re.search(r"Submitted application (application_\d+_\d+)", stdout.read_text())):
            app_id = found.group(1)
        if app_id is not None:
            report = rm.application(app_id)
            if report.state == "RUNNING" and "/proxy/" in report.tracking_url:
                try:
                    page = rm.fetch(am_page_url(report.tracking_url, STATUS_JSON), timeout=10)
                    status = page.json() if page.status_code == 200 else {}
                except (httpx.HTTPError, ValueError):
                    status = {}
                if status.get("training"):
                    seen.append({**status["training"], "refused": status.get("training_refused")})
        time.sleep(0.5)
    return seen


def submit_watching_training(rm: ResourceManagerClient, tmp_path: Path, *args: str,
                             timeout: float = 600) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """The real `ytf-submit` with `args`, and the AM's `training` numbers seen while the job ran."""
    stdout, stderr = tmp_path / "ytf-submit.stdout", tmp_path / "ytf-submit.stderr"
    with stdout.open("w") as out, stderr.open("w") as err:
        submit = subprocess.Popen([str(BIN / "ytf-submit"), *args], stdout=out, stderr=err, text=True)
        try:
            seen = _training_while_running(rm, stdout, submit)
            submit.wait(timeout=timeout)
        finally:
            if submit.poll() is None:
                submit.kill()
                submit.wait()
    return subprocess.CompletedProcess(submit.args, submit.returncode, stdout.read_text(), stderr.read_text()), seen


def assert_training_shown(proc: subprocess.CompletedProcess, seen: list[dict], task: str, epochs: int,
                          steps: int) -> None:
    """Issue #52: while the job ran, the AM's status page had percent, time left and the loss from `task`'s
    reports, nothing was refused, and ytf-submit's progress line showed them
    (`... · running · epoch 2/4 · 45% · ~3 s left · loss 0.412`)."""
    assert seen, "the AM's status page never had the training's numbers"
    # another task's reports show until `task`'s first arrives (the first to report leads until then); after it,
    # only `task`'s
    drivers = [t["task"] for t in seen]
    assert task in drivers and set(drivers[drivers.index(task):]) == {task}, drivers
    assert {t["source"] for t in seen} == {"report"}, seen
    assert any(t["task"] == task and t["percent"] is not None and 0 < t["percent"] < 100 and t["eta_s"] is not None
               and "loss" in t["metrics"] for t in seen), seen
    assert (seen[-1]["total_epochs"], seen[-1]["total_steps"]) == (epochs, steps), seen[-1]
    assert all(not any(t["refused"].values()) for t in seen), seen[-1]
    lines = re.findall(rf"^application_\S+ RUNNING · attempt 1/1 · running · (epoch \d+/{epochs} · \d+% · .*)$",
                       proc.stderr, re.M)
    assert lines and any("loss " in line for line in lines), proc.stderr[-3000:]
