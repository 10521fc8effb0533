"""One real local YARN + HDFS per test session, and the nothing-left-behind check.

The cluster is started by the same code path as `tony cluster up` and stopped
at the end of the session. After every end-to-end test, no application may be
active on it and no container process may be alive.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import krb5_config, record
from tony_airflow.cli import tony as cli
from tony_airflow.local.cluster import LocalCluster
from tony_airflow.local.cluster.processes import terminate
from tony_airflow.yarn.kerberos import KerberosLogin, spnego
from tony_airflow.yarn.rest import ACTIVE_STATES, ResourceManagerClient

LEFTOVER_GRACE_S = 30.0


# The plain cluster, while it runs, and the id of the last test that uses it (pytest_collection_finish)
_PLAIN: dict[str, Any] = {}


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory):
    state_dir = tmp_path_factory.mktemp("local-cluster")
    assert cli.run(["cluster", "up", "--state-dir", str(state_dir), "--gpus", "2"]) == 0
    cluster = LocalCluster(state_dir)
    saved = dict(os.environ)
    os.environ.update(cluster.env())
    _PLAIN["cluster"] = cluster
    try:
        yield cluster
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if _PLAIN.pop("cluster", None) is not None:
            cluster.down(log=lambda *_: None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """The plain cluster stops after the last test that uses it (its fixtures torn down first): its five
    daemons would otherwise run idle beside the production-shape cluster's fifteen, on the same 2 cores,
    for the last 25 minutes of a run."""
    yield
    cluster = _PLAIN.get("cluster")
    if cluster is not None and item.nodeid == _PLAIN.get("last_user") and nextitem is not None:
        _PLAIN.pop("cluster")
        cluster.down(log=lambda *_: None)


@pytest.fixture(scope="session")
def rm(local_cluster: LocalCluster) -> ResourceManagerClient:
    return ResourceManagerClient(local_cluster.rm_url)


PRODUCTION_SHAPE = ["--secure", "--ha", "--nodes", "3"]


@pytest.fixture(scope="session")
def secure_cluster(tmp_path_factory: pytest.TempPathFactory):
    """The one production-shape cluster of the session, beside the plain one: Kerberos (a real MIT KDC,
    per-host principals), HA (two NameNodes of hdfs://tony/, two ResourceManagers, ZooKeeper) and three
    worker hosts (`tony cluster up --secure --ha --nodes 3`; without root, no hosts). Every secure test,
    the failover tests and the many-host tests (tests/e2e/test_secure_hosts.py) run on it; at the end
    nothing of it may be left: no namespace, link, bridge or process.

    KRB5_CONFIG names its realm for the whole session: gssapi in this process reads it per call,
    and a simple-auth cluster never looks at it."""
    state_dir = tmp_path_factory.mktemp("secure-cluster")
    started = time.monotonic()
    shape = PRODUCTION_SHAPE if os.geteuid() == 0 else PRODUCTION_SHAPE[:2]
    cluster = LocalCluster(state_dir)
    try:
        assert cli.run(["cluster", "up", *shape, "--state-dir", str(state_dir)]) == 0
    except BaseException:
        cluster.down(log=lambda *_: None)
        raise
    record(f"secure cluster up ({' '.join(shape)})", time.monotonic() - started)
    network = cluster.network  # asked before `down`, which removes it
    with krb5_config(cluster.kdc.krb5_conf):
        try:
            yield cluster
        finally:
            cluster.down(log=lambda *_: None)
    if network is not None:
        left = [n for n in network.namespaces() if n.startswith(network.prefix + "h")]
        links = [link for link in network.links() if link.startswith(network.prefix)]
        assert not left and not links, f"left behind by `tony cluster down`: namespaces {left}, links {links}"
    assert not any(cluster.running().values()), cluster.running()


@pytest.fixture(scope="session")
def secure_rm(secure_cluster: LocalCluster) -> ResourceManagerClient:
    """The secure RM as the test user, from its keytab (SPNEGO, no kinit)."""
    login = KerberosLogin(secure_cluster.kdc.user_principal, str(secure_cluster.kdc.user_keytab))
    return ResourceManagerClient(secure_cluster.rm_urls, auth=spnego(login))


@pytest.fixture(scope="module")
def preemption_cluster(tmp_path_factory: pytest.TempPathFactory):
    """`tony cluster up --preemption` (two queues, YARN's preemption monitor): started once, by the one
    module that uses it (tests/e2e/test_preemption.py), and stopped after it."""
    state_dir = tmp_path_factory.mktemp("preemption-cluster")
    started = time.monotonic()
    cluster = LocalCluster(state_dir)
    try:
        assert cli.run(["cluster", "up", "--preemption", "--state-dir", str(state_dir)]) == 0
        record("preemption cluster up", time.monotonic() - started)
    except BaseException:
        cluster.down(log=lambda *_: None)
        raise
    try:
        yield cluster
    finally:
        cluster.down(log=lambda *_: None)
        assert not any(cluster.running().values()), cluster.running()


@pytest.fixture(scope="module")
def preemption_rm(preemption_cluster: LocalCluster) -> ResourceManagerClient:
    return ResourceManagerClient(preemption_cluster.rm_url)


@pytest.fixture(scope="module")
def airflow_deployment(local_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory):
    """Airflow as users run it, for the one module that uses it (tests/e2e/test_airflow_deployment.py; kept
    for the session, its four components took 10 CPU-minutes of 2 cores beside the later tests): scheduler,
    dag-processor, triggerer and api-server as separate processes with one home, the example DAGs, and
    `yarn_default` naming the test cluster.
    Their environment has neither HADOOP_CONF_DIR nor the cluster's launchers on PATH: the connection
    is all they know of the cluster."""
    from tests.e2e.airflow_deployment import AirflowDeployment
    from tony_airflow.cli.dag_test import local_yarn_connection

    examples = Path(__file__).resolve().parents[2] / "dags_examples"
    home = tmp_path_factory.mktemp("airflow-deployment")
    deployment = AirflowDeployment(home, [examples / "tony_pipeline.py", examples / "tony_model_evaluation.py",
                                          Path(__file__).parent / "airflow_dags" / "tony_retried.py"],
                                   local_yarn_connection(local_cluster))
    # OpenLineage configured, as a lineage user has it: its events in a file the tests read (issue #52)
    deployment.env["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps(
        {"type": "file", "log_file_path": str(deployment.openlineage_events), "append": True})
    cluster_bin = str(local_cluster.state_dir / "bin")
    deployment.env.pop("HADOOP_CONF_DIR", None)
    deployment.env["PATH"] = os.pathsep.join(p for p in deployment.env["PATH"].split(os.pathsep) if p != cluster_bin)
    started = time.monotonic()
    try:
        deployment.start()
        record("airflow deployment up (db migrate + 4 components + DAGs parsed)", time.monotonic() - started)
        yield deployment
    finally:
        left = deployment.stop()
        assert not left, f"Airflow components still running after stop: process groups {left}"


@pytest.fixture(scope="session")
def docker_engine(tmp_path_factory: pytest.TempPathFactory):
    """Docker's daemon, as `tony cluster up --docker` starts it (host networking only); stopped at the end
    if this session started it. podman has no daemon."""
    from tony_airflow.local.containers import daemon

    pid = daemon.ensure_running("docker", tmp_path_factory.mktemp("dockerd") / "dockerd.log", log=lambda *_: None)
    try:
        yield "docker"
    finally:
        daemon.stop_daemon(pid)


@pytest.fixture(scope="module")
def airflow_env(local_cluster, tmp_path_factory) -> dict[str, str]:
    """A throwaway Airflow home and a `yarn_default` connection naming the test cluster (a module of the
    secure cluster has its own)."""
    from tony_airflow.cli.dag_test import local_yarn_connection

    home = tmp_path_factory.mktemp("airflow-home")
    return {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW_CONN_YARN_DEFAULT": local_yarn_connection(local_cluster)}


_ROOTFS: dict[str, object] = {}  # the image's root file system, made in the background from the session's start


_TOKEN_JOB: dict[str, object] = {}  # test_renewed_tokens.py's 6-minute job, started with the session


def pytest_collection_finish(session: pytest.Session) -> None:
    """When a collected test runs in `tony image build`'s image, its slow part (debootstrap, pip) starts
    now, beside the tests that come first, and `tony_image` waits for it. So does the 6-minute job of
    test_renewed_tokens.py (tests/e2e/token_job.py), which mostly sleeps."""
    users = [item.nodeid for item in session.items if "local_cluster" in getattr(item, "fixturenames", ())]
    _PLAIN["last_user"] = users[-1] if users else None
    if session.config.option.collectonly:  # `--collect-only` runs nothing: no cluster, no image build
        return
    if any("long_token_job" in getattr(item, "fixturenames", ()) for item in session.items):
        from tests.e2e.token_job import LongTokenJob

        state_dir = session.config._tmp_path_factory.mktemp("short-token-cluster")  # type: ignore[attr-defined]
        _TOKEN_JOB["job"] = LongTokenJob(state_dir).start()
    if not any("tony_image" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    from tony_airflow.local.containers import image

    def prepare() -> None:
        started = time.monotonic()
        try:
            image.prepare(log=lambda *_: None)
            record("tony image build: root file system (in the background)", time.monotonic() - started)
        except BaseException as exc:  # told by the fixture, in the test that needs it
            _ROOTFS["error"] = exc

    _ROOTFS["thread"] = thread = threading.Thread(target=prepare, name="rootfs", daemon=True)
    thread.start()


@pytest.fixture(scope="session")
def tony_image(docker_engine: str) -> str:
    """`tony image build`'s image, in docker (built once; a later session finds it up to date)."""
    from tony_airflow.local.containers import image

    started = time.monotonic()
    thread = _ROOTFS.get("thread")
    if isinstance(thread, threading.Thread):
        thread.join()
    if "error" in _ROOTFS:
        raise _ROOTFS["error"]  # type: ignore[misc]
    name = image.build(docker_engine, log=lambda *_: None)
    record("tony image build (docker), after the background part", time.monotonic() - started)
    return name


BUSYBOX = "tony-airflow-test/busybox:1"
NO_SHELL = "tony-airflow-test/no-shell:1"
APPLETS = ("sh", "sleep", "cat", "echo", "head", "tail", "ls", "id", "env", "kill", "true")


def _import(engine: str, name: str, files: dict[str, Path | None], tmp: Path) -> None:
    """A tarball of `files` (path in the image -> file, or None: a link to busybox) imported as `name`."""
    archive = tmp / f"{name.replace('/', '_')}.tar"
    with tarfile.open(archive, "w") as tar:
        for inside, source in files.items():
            if source is None:
                info = tarfile.TarInfo(inside)
                info.type, info.linkname = tarfile.SYMTYPE, "/bin/busybox"
                tar.addfile(info)
            else:
                tar.add(str(source), arcname=inside)
    with open(archive, "rb") as data:
        subprocess.run([engine, "import", "-", name], stdin=data, check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="session")
def small_images(docker_engine, tmp_path_factory) -> list[str]:
    """The busybox image and an image without a shell, in both engines."""
    busybox = shutil.which("busybox")
    assert busybox, "busybox-static is installed by make test"
    tmp = tmp_path_factory.mktemp("images")
    marker = tmp / "marker"
    marker.write_text("busybox test image\n")
    for engine in ("docker", "podman"):
        _import(engine, BUSYBOX, {"bin/busybox": Path(busybox), "etc/tony-airflow-image": marker,
                                  **{f"bin/{a}": None for a in APPLETS}}, tmp)
        _import(engine, NO_SHELL, {"etc/tony-airflow-image": marker}, tmp)
    return [BUSYBOX, NO_SHELL]


def leftovers(cluster: LocalCluster, rm: ResourceManagerClient) -> tuple[list, list]:
    apps = rm.applications(states=ACTIVE_STATES)
    return apps, cluster.container_processes()


@pytest.fixture(autouse=True)
def nothing_left_behind(request: pytest.FixtureRequest):
    """After each e2e test that used a cluster: no active application, no container process."""
    names = [("local_cluster", "rm"), ("secure_cluster", "secure_rm"), ("preemption_cluster", "preemption_rm")]
    used = next(((c, r) for c, r in names if c in request.fixturenames), None)
    if used:
        cluster: LocalCluster = request.getfixturevalue(used[0])
        rm_client: ResourceManagerClient = request.getfixturevalue(used[1])
    yield
    if not used:
        return
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    apps, procs = leftovers(cluster, rm_client)
    while (apps or procs) and time.monotonic() < deadline:
        time.sleep(0.5)
        apps, procs = leftovers(cluster, rm_client)
    if apps or procs:
        for app in apps:  # clean up so that later tests start from nothing
            rm_client.kill(app.id)
        terminate([p.pid for p in procs], grace=5.0)
        pytest.fail(f"left behind after {LEFTOVER_GRACE_S:.0f}s: applications "
                    f"{[(a.id, a.state) for a in apps]}, container processes "
                    f"{[(p.pid, p.container_id, p.cmdline[:80]) for p in procs]}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The long token job's cluster goes with the session, also when its test never ran (-x, a crash)."""
    job = _TOKEN_JOB.get("job")
    if job is not None:
        job.down()  # type: ignore[attr-defined]
