"""The client: job spec -> skein ApplicationSpec -> a submitted YARN application.

Every front end (CLI, Airflow, Azkaban, Oozie) hands a JobSpec to
`TonyClient.submit` and gets a `JobHandle` back; none of them talks to YARN on
its own. The AM is our Python AM run as skein's master script; the task
containers are skein services whose initial instances are attempt 1's tasks
(see placement.py); a retry's containers are added by the AM one by one.
The client itself speaks HTTP only: the submission goes through the RM's REST
API and WebHDFS (yarn/submission.py), progress comes from the AM's own page.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import skein

from tony_airflow.core import protocol
from tony_airflow.core.am.token_renewal import KEYTAB_ENV, KEYTAB_FILE, PRINCIPAL_ENV
from tony_airflow.core.history.store import history_dir
from tony_airflow.core.placement import initial_tasks, service_host, service_names
from tony_airflow.core.protocol import APP_TAG, SUBMITTED_AT_ENV, Progress
from tony_airflow.core.spec import JobSpec
from tony_airflow.errors import ClusterError, UsageError
from tony_airflow.yarn import staging_dirs, submission
from tony_airflow.yarn.delegation import fetch_tokens
from tony_airflow.yarn.discovery import ClusterConfig, discover
from tony_airflow.yarn.hdfs import hdfs_path, webhdfs
from tony_airflow.yarn.jvm import LIGHT_JVM_FLAGS
from tony_airflow.yarn.kerberos import KerberosLogin, check_credentials
from tony_airflow.yarn.rest import ApplicationReport, ResourceManagerClient, ResourceManagerError
from tony_airflow.yarn.scheduler_info import find_queue, leaf_queues, scheduler_info
from tony_airflow.yarn.tokens import HDFS_DELEGATION_KIND, HadoopToken, read_token_file, token_file

if TYPE_CHECKING:
    from fsspec.implementations.webhdfs import WebHDFS

log = logging.getLogger("tony.client")


def build_application(job: JobSpec, staging: Path, secret: str, hadoop_conf_dir: str | None = None,
                      keytab_login: KerberosLogin | None = None) -> skein.ApplicationSpec:
    """The skein ApplicationSpec for a job; shipped files are staged under `staging`. `keytab_login`: the
    keytab goes to the AM alone, a private local resource, for new HDFS tokens during the job
    (core/am/token_renewal.py)."""
    # The effective spec names the history directory the submitter's `tony history` reads.
    job = dataclasses.replace(job, history_dir=history_dir(job.history_dir))
    (staging / protocol.JOB_FILE).write_text(job.to_json())
    secret_path = staging / protocol.SECRET_FILE
    secret_path.write_text(secret)
    secret_path.chmod(0o600)
    files: dict[str, skein.File] = {
        protocol.JOB_FILE: skein.File(str(staging / protocol.JOB_FILE), type="file"),
        protocol.SECRET_FILE: skein.File(str(secret_path), type="file"),
    }
    if job.script:
        files[Path(job.script).name] = skein.File(str(Path(job.script).absolute()), type="file")
    if job.src_dir:
        archive = shutil.make_archive(str(staging / protocol.SRC_DIR), "zip", root_dir=job.src_dir)
        files[protocol.SRC_DIR] = skein.File(archive, type="archive")
    env = {"PYTHONUNBUFFERED": "1", protocol.ENV_PYTHON: job.python, **job.env}
    task_files = dict(files)
    if job.python_venv:
        task_files[protocol.VENV_DIR] = skein.File(_source(job.python_venv), type="archive")
    master_env = {"JAVA_TOOL_OPTIONS": " ".join(LIGHT_JVM_FLAGS), **env,  # for skein's Java AM
                  SUBMITTED_AT_ENV: f"{time.time():.3f}"}
    master_files = dict(files)
    if keytab_login is not None and keytab_login.keytab and keytab_login.principal:
        master_files[KEYTAB_FILE] = skein.File(str(Path(keytab_login.keytab).absolute()), type="file",
                                               visibility="private")
        master_env.update({KEYTAB_ENV: KEYTAB_FILE, PRINCIPAL_ENV: keytab_login.principal})
        if os.environ.get("KRB5_CONFIG"):  # a realm of its own (the local cluster's): the AM needs its KDC
            master_env["KRB5_CONFIG"] = os.environ["KRB5_CONFIG"]
    master = skein.Master(
        resources=skein.Resources(memory=job.am_memory_mb, vcores=job.am_vcores),
        files=master_files, env=master_env,
        script=f"exec {job.python} -m tony_airflow.core.am",
    )
    services = {}
    first = initial_tasks(job)  # attempt 1's containers: skein's AM asks for them as soon as it starts
    for name, (type_, memory, vcores, gpus) in service_names(job).items():
        host = service_host(job, name)  # a spread type's service asks for its one host, and only it
        services[name] = skein.Service(
            resources=skein.Resources(memory=memory, vcores=vcores, gpus=gpus),
            script=f"exec {job.python} -m tony_airflow.core.executor",
            files=task_files, env={**env, **docker_env(job, type_, hadoop_conf_dir)},
            instances=len(first[name]), max_restarts=0, allow_failures=True,
            node_label=job.tasks[type_].node_label,
            nodes=[host] if host else None, relax_locality=not host,  # YARN's strict locality
        )
    return skein.ApplicationSpec(
        name=job.name, queue=job.queue, tags=set(job.tags) | {APP_TAG},
        # 1, whatever --am-attempts says: skein's AM does not unregister a FAILED application while its
        # spec allows another attempt ("will retry"), so a job that failed would be run again by a second
        # AM. YARN's own attempts (the submission's max-app-attempts) are what a lost AM needs.
        services=services, master=master, max_attempts=1,
        node_label=job.am_node_label,  # skein's application label: our submission gives it to the AM only
    )


def _source(path: str) -> str:
    return path if "://" in path else str(Path(path).absolute())


def docker_env(job: JobSpec, type_name: str, hadoop_conf_dir: str | None = None) -> dict[str, str]:
    """With `docker_runtime: yarn`, the launch context that makes a NodeManager run a type's tasks in
    Docker (YARN's Docker runtime, LinuxContainerExecutor). With the default `engine` runtime nothing
    of YARN's is asked: the executor runs the command in the image (core/executor/engine.py).

    Only the task containers run in the image; the AM runs natively. Mounted
    read-only: HADOOP_CONF_DIR and JAVA_HOME; read-write: local (non-HDFS)
    input and output paths, so the task environment (docs/ARCHITECTURE.md) holds inside the container.
    """
    image = job.image_of(type_name)
    if not image or job.docker_runtime != "yarn":
        return {}
    mounts = []
    conf_dir = hadoop_conf_dir or os.environ.get("HADOOP_CONF_DIR", "")
    for path, mode in ((conf_dir, "ro"), (os.environ.get("JAVA_HOME", ""), "ro"),
                       (job.input_path, "ro"), (job.output_path, "rw")):
        if path and "://" not in path and path.startswith("/"):
            mounts.append(f"{path}:{path}:{mode}")
    mounts += job.docker_mounts
    env = {
        "YARN_CONTAINER_RUNTIME_TYPE": "docker",
        "YARN_CONTAINER_RUNTIME_DOCKER_IMAGE": image,
        "YARN_CONTAINER_RUNTIME_DOCKER_RUN_OVERRIDE_DISABLE": "false",
    }
    if mounts:
        env["YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS"] = ",".join(mounts)
    return env


PROGRESS_TIMEOUT_S = 5.0
ENDGAME_POLL_S = 0.2  # RM polls once a task has ended or the outcome is decided (the rest follows within seconds)
# Hadoop's defaults for a client whose ResourceManager does not answer: yarn.resourcemanager.connect.max-wait.ms
# (15 min) and .retry-interval.ms (30 s); the configuration's own values win (TonyClient).
RM_PATIENCE_S = 900.0
RM_MAX_AM_ATTEMPTS = 2  # YarnConfiguration.DEFAULT_RM_AM_MAX_ATTEMPTS
RM_RETRY_S = 30.0
ENDGAME_POLLS = 50    # at most this many in a row (10 s), then the caller's interval again


class JobHandle:
    """A submitted job (or one reconnected to by id): its state, its progress, and the means to stop it."""

    def __init__(self, app_id: str, rm: ResourceManagerClient, rm_patience_s: float = RM_PATIENCE_S):
        self.app_id = app_id
        self.rm = rm
        self.rm_patience_s = rm_patience_s  # how long the wait rides out an RM that does not answer
        self.last_report: ApplicationReport | None = None
        self._am_address: str | None = None
        self._secret = ""
        self._job: JobSpec | None = None

    def status(self) -> ApplicationReport:
        self.last_report = self.rm.application(self.app_id)
        return self.last_report

    @property
    def tracking_url(self) -> str:
        return (self.last_report or self.status()).tracking_url

    @property
    def diagnostics(self) -> str:
        return (self.last_report or self.status()).diagnostics

    def kill(self) -> None:
        self.rm.kill(self.app_id)

    @property
    def am_address(self) -> str | None:
        """The registry's host:port, as the AM's progress page last gave it (direct, not proxied)."""
        return self._am_address

    def progress(self, report: ApplicationReport | None = None) -> Progress | None:
        """The AM's own counts (allocated, registered, ...), read from its page through the tracking URL
        of `report` (a fresh one when not given); None before the AM serves it, and after the end."""
        report = report or self.status()
        url = protocol.progress_url(report.tracking_url)
        if report.state != "RUNNING" or url is None:
            return None
        try:
            resp = self.rm.fetch(url, timeout=PROGRESS_TIMEOUT_S)
            answer = resp.json() if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError):  # the AM is not up yet, or already gone: a nicety, not the state
            return None
        progress, address = protocol.progress_page(answer)
        self._am_address = address or self._am_address
        return progress

    def run_local_tasks(self, poll: float = 0.5) -> int:
        """Client mode: run the job's local task (the chief) here, once per attempt, until the job ends.

        It registers with the AM like any executor (same secret, same protocol,
        same environment) and returns the exit code of its last run. A watcher
        stops it as soon as the ResourceManager says the application ended
        (`tony kill`, a failed gang); the executor itself also gives up when the AM
        stops answering.
        """
        from tony_airflow.core.executor.task import Executor, RegistryClient
        from tony_airflow.core.runtimes import TaskIdentity

        job = self._job
        if job is None or not self._secret or not job.local_types():
            raise UsageError("client mode: only the process that submitted the job can run its chief "
                             "(a reconnected handle has neither the job nor its secret)")
        code, done_attempt = 0, 0
        while True:
            report = self.status()
            if report.is_terminal:
                return code
            progress, address = self.progress(report), self.am_address
            if progress is None or address is None or progress.attempt <= done_attempt:
                time.sleep(poll)
                continue
            for type_ in job.local_types():
                me = TaskIdentity(type=type_, index=0, attempt=progress.attempt, app_id=self.app_id)
                host = os.environ.get(protocol.ENV_CLIENT_HOST) or socket.gethostname()
                executor = Executor(job, me, RegistryClient(address, self._secret), host, local=True)
                with self._stop_when_ended(executor):
                    code = executor.run()
            done_attempt = progress.attempt

    @contextlib.contextmanager
    def _stop_when_ended(self, executor: Any, every: float = 2.0) -> Iterator[None]:
        """Stop a local task once YARN says the application is over."""
        done = threading.Event()

        def watch() -> None:
            while not done.wait(every):
                try:
                    report = self.rm.application(self.app_id)
                except Exception:  # the RM is unreachable for a moment: the executor's own limit still holds
                    continue
                if report.is_terminal:
                    executor.stop(f"the application ended: {report.state} {report.final_status}")
                    return

        watcher = threading.Thread(target=watch, name="app-watch", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            done.set()

    def wait(self, poll: float = 1.0, timeout: float | None = None,
             on_change: Callable[[ApplicationReport, Progress | None], None] | None = None,
             on_poll: Callable[[ApplicationReport], None] | None = None) -> ApplicationReport:
        """Block until the application is FINISHED, FAILED or KILLED; `on_poll` sees every report
        (the live output is read there)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        seen: tuple | None = None
        known: Progress | None = None  # the last progress the AM gave: it stops answering as it ends
        fast = 0
        while True:
            report = self._status_riding_out(poll)
            progress = self.progress(report) if not report.is_terminal else None
            known = progress or known
            key = (report.state, report.final_status, progress)
            if on_change is not None and key != seen:
                on_change(report, progress)
            seen = key
            if on_poll is not None:
                on_poll(report)
            if report.is_terminal:
                return report
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{self.app_id} still {report.state} after {timeout}s")
            # A task has ended (the others mostly follow: a gang's workers end together, a ps is stopped
            # then), the attempt's outcome is decided, or the AM that answered stopped answering (it is
            # ending): what is left is often a second or two. Look more often so the caller learns the end
            # when it happens, not up to a whole interval later; for a bounded number of polls (the RM's
            # load: ENDGAME_POLLS, then the caller's interval again).
            ending = known is not None and (progress is None or known.ending or known.finished > 0)
            fast = fast + 1 if ending else 0
            time.sleep(min(poll, ENDGAME_POLL_S) if 0 < fast <= ENDGAME_POLLS else poll)


    def _status_riding_out(self, poll: float) -> ApplicationReport:
        """The report, asking again while the RM does not answer (down, busy, failing over) for up to
        `rm_patience_s`, as Hadoop's own clients do (yarn.resourcemanager.connect.max-wait.ms); a
        refusal (4xx) ends the wait at once. Giving up early would orphan a running application."""
        first_error: float | None = None
        while True:
            try:
                return self.status()
            except ResourceManagerError as exc:
                if not exc.transient:
                    raise
                now = time.monotonic()
                first_error = now if first_error is None else first_error
                if now - first_error >= self.rm_patience_s:
                    raise ResourceManagerError(f"the ResourceManager did not answer for "
                                               f"{self.rm_patience_s:.0f}s: {exc}") from None
                time.sleep(min(max(poll, 1.0), RM_RETRY_S))


def rm_patience(max_wait_ms: str | None) -> float:
    """Seconds to ride out a silent RM, from yarn.resourcemanager.connect.max-wait.ms (-1: for ever)."""
    try:
        value = int(str(max_wait_ms).strip())
    except ValueError:
        return RM_PATIENCE_S
    return math.inf if value < 0 else value / 1000.0


class TonyClient:
    """Submits jobs to the cluster that HADOOP_CONF_DIR (or the local cluster) names."""

    def __init__(self, conf_dir: str | None = None, rm: ResourceManagerClient | None = None,
                 principal: str | None = None, keytab: str | None = None):
        """`rm` overrides the ResourceManager addresses of the configuration (Airflow's
        connection may name them); `principal`/`keytab` log the client in with Kerberos.
        The process environment is left as it is: the cluster is this client's own setting."""
        self.cluster: ClusterConfig = discover(conf_dir)
        self.environment = self.cluster.environment
        self.conf = self.cluster.hadoop
        self.login = KerberosLogin(principal, keytab)
        # On a Kerberos cluster: a keytab, Hadoop tokens or a ticket, or one line now (exit 2)
        check_credentials(self.cluster.auth, self.login)
        self.rm = rm or ResourceManagerClient.from_conf(self.conf, login=self.login)
        self.rm_patience_s = rm_patience(self.conf.get("yarn.resourcemanager.connect.max-wait.ms"))

    def __enter__(self) -> TonyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to release: the client holds no process and no connection between calls."""

    def application_tokens(self) -> list[HadoopToken]:
        """What the application's containers authenticate with on a Kerberos cluster: the token file's
        (a scheduler's job without a keytab), else an HDFS and an RM token fetched as the login."""
        if not self.conf.kerberos:
            return []
        given = token_file()
        if given is not None and not self.login.uses_keytab:
            return read_token_file(given)
        return fetch_tokens(self.conf, self.login)

    # ------------------------------------------------------------ validation
    def max_allocation(self, queue: str) -> tuple[int, int] | None:
        """(MiB, vcores) the queue can give one container, asked of the ResourceManager."""
        info = scheduler_info(self.rm.get("/ws/v1/cluster/scheduler"))
        found = find_queue(info, queue)
        if found is None:
            names = sorted(leaf_queues(info))
            if names:
                raise UsageError(f"queue: {queue!r} is not a queue of this cluster; allowed: {', '.join(names)}")
            found = info
        alloc = found.get("maximumAllocation") or info.get("maximumAllocation")
        if not alloc:
            return None
        return int(alloc["memory"]), int(alloc["vCores"])

    def validate(self, job: JobSpec) -> JobSpec:
        job.validate(max_allocation=self.max_allocation(job.queue))
        most = self.rm_max_am_attempts()
        if job.am_attempts > most:
            raise UsageError(f"am_attempts: {job.am_attempts} is above this ResourceManager's "
                             f"yarn.resourcemanager.am.max-attempts ({most}); allowed: 1 to {most}")
        nodes = (self.rm.get("/ws/v1/cluster/nodes").get("nodes") or {}).get("node") or []
        self._check_gpus_and_labels(job, nodes)
        if nodes:  # no node has registered yet: nothing to measure against
            job.check_capacity(_partitions(nodes))
        if job.spread:  # in place: callers submit the job they validated
            job.spread_hosts = _spread_hosts(job, nodes)
        self.check_input(job)
        return job

    def check_input(self, job: JobSpec) -> None:
        """An `hdfs://` input that does not exist is refused before submission, as Spark refuses a missing
        path: the tasks would stage nothing and train on no data (issue #51). An empty directory is an
        input. Any other input is a path on the tasks' hosts, which this client cannot see."""
        if not job.input_path.startswith("hdfs:"):
            return
        try:
            fs = webhdfs(self.conf, user=self.rm.user, login=self.login, uri=job.input_path)
            fs.info(hdfs_path(job.input_path))
        except FileNotFoundError:
            raise UsageError(f"input: {job.input_path} does not exist; allowed: an existing path in HDFS "
                             "(an empty directory is allowed)") from None
        except PermissionError as exc:
            raise UsageError(f"input: {job.input_path} cannot be read as {self.rm.user}: {_one_line(exc)}") from None
        except (OSError, RuntimeError, ValueError, ClusterError) as exc:
            raise ClusterError(f"webhdfs: checking the input {job.input_path} failed: {_one_line(exc)}") from None

    def rm_max_am_attempts(self) -> int:
        """The most application attempts the RM grants (yarn.resourcemanager.am.max-attempts, default 2)."""
        try:
            return max(1, int(self.conf.get("yarn.resourcemanager.am.max-attempts") or RM_MAX_AM_ATTEMPTS))
        except ValueError:
            return RM_MAX_AM_ATTEMPTS

    def _check_gpus_and_labels(self, job: JobSpec, nodes: list[dict[str, Any]]) -> None:
        """GPUs no node has, and labels the cluster does not know, can never be scheduled."""
        wanted = {t.name: t.gpus for t in job.tasks.values() if t.gpus}
        labels = {t.name: t.node_label for t in job.tasks.values() if t.node_label}
        if job.am_node_label:
            labels["the AM"] = job.am_node_label
        if not (wanted or labels):
            return
        if wanted:
            most = max((_gpus_of(n) for n in nodes), default=0)
            type_, n = max(wanted.items(), key=lambda kv: kv[1])
            if most == 0:
                raise UsageError(f"task_gpus: {type_} asks {n} GPU(s); no node of this cluster offers yarn.io/gpu")
            if n > most:
                raise UsageError(f"task_gpus: {type_} asks {n} GPU(s) per task; the largest node has {most}")
        if labels:
            infos = self.rm.get("/ws/v1/cluster/get-node-labels").get("nodeLabelInfo") or []
            infos = [infos] if isinstance(infos, dict) else infos  # Jersey writes one item as an object
            known = {info.get("name") for info in infos}
            for type_, label in labels.items():
                if label not in known:
                    field = "am_node_label" if type_ == "the AM" else "node_label"
                    raise UsageError(f"{field}: {type_} asks label {label!r}; allowed: "
                                     f"{', '.join(sorted(known)) or '(this cluster has no node labels)'}")

    # ---------------------------------------------------------------- submit
    def submit(self, job: JobSpec, validated: bool = False) -> JobHandle:
        """Submit `job` (checked against the cluster first, unless the caller just did)."""
        if not validated:
            self.validate(job)
        secret = protocol.new_secret()
        with tempfile.TemporaryDirectory(prefix="tony-submit-") as staging:
            keytab = self.login if self.conf.kerberos and self.login.uses_keytab else None
            app_id = self.submit_spec(build_application(job, Path(staging), secret,
                                                        self.environment["HADOOP_CONF_DIR"], keytab),
                                      am_attempts=job.am_attempts,
                                      attempt_validity_ms=int(job.am_attempts_validity_s * 1000))
        handle = JobHandle(app_id, self.rm, self.rm_patience_s)
        handle._secret, handle._job = secret, job
        return handle

    def submit_spec(self, spec: skein.ApplicationSpec, am_attempts: int = 1, attempt_validity_ms: int = 0) -> str:
        """Submit a skein application (a job's, or a bare one for the benchmarks); its application id.
        `am_attempts`: YARN application attempts (a lost AM's successors); `attempt_validity_ms`: how long
        an AM failure counts against them (0: always)."""
        tokens = self.application_tokens()
        hdfs_token = next((t.url_string() for t in tokens if t.kind == HDFS_DELEGATION_KIND), None)
        try:
            fs = webhdfs(self.conf, user=self.rm.user, login=self.login, token=hdfs_token)
            app_id = submission.submit(spec, self.rm, fs, self.conf, tokens=tokens,
                                       lang=self.environment.get("LANG") or os.environ.get("LANG"),
                                       am_attempts=am_attempts, attempt_validity_ms=attempt_validity_ms).app_id
        except ResourceManagerError as exc:
            what = "the ResourceManager did not answer the submission" if exc.transient else "YARN refused the submission"
            raise ClusterError(f"{what}: {_one_line(exc)}") from None
        except ClusterError as exc:
            raise ClusterError(f"YARN refused the submission: {_one_line(exc)}") from None
        except (OSError, RuntimeError, ValueError) as exc:  # WebHDFS: refused, or unreachable
            raise ClusterError(f"webhdfs: staging the application's files failed: {_one_line(exc)}") from None
        self._sweep_staging(fs, keep=app_id)
        return app_id

    def _sweep_staging(self, fs: WebHDFS, keep: str) -> None:
        """What kills by other means (`yarn application -kill`, the RM UI) and dead clients left in HDFS."""
        try:
            removed = staging_dirs.sweep(self.rm, fs, fs.home_directory(), keep=frozenset({keep}))
        except Exception as exc:  # housekeeping: never the submission's failure
            log.warning("staging sweep skipped: %s", exc)
            return
        if removed:
            log.info("removed the staging directories of ended applications: %s", ", ".join(removed))

    def kill(self, app_id: str) -> None:
        """Kill `app_id` through YARN, then remove its staging directory once YARN says it ended (skein's AM
        removes it only when the application ends by itself)."""
        self.rm.kill(app_id)
        self.remove_staging(app_id)

    def remove_staging(self, app_id: str, wait_s: float = staging_dirs.ENDED_WAIT_S) -> bool:
        """Remove an ended application's staging directory; never raises (the next submission's sweep retries)."""
        try:
            fs = webhdfs(self.conf, user=self.rm.user, login=self.login)
            return staging_dirs.remove_when_ended(self.rm, fs, fs.home_directory(), app_id, wait_s=wait_s)
        except Exception as exc:
            log.warning("the staging directory of %s stays for the next sweep: %s", app_id, exc)
            return False

    def handle(self, app_id: str) -> JobHandle:
        """A handle on a job submitted earlier (a retry reconnecting): status, progress, kill."""
        return JobHandle(app_id, self.rm, self.rm_patience_s)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:500] or type(exc).__name__


def _partitions(nodes: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """node label ('' = default partition) -> (MiB, vcores) of its running nodes together."""
    totals: dict[str, tuple[int, int]] = {}
    for node in nodes:
        if node.get("state") not in (None, "RUNNING"):
            continue
        total = node.get("totalResource") or {}
        mem = int(total.get("memory") or 0) or int(node.get("availMemoryMB", 0)) + int(node.get("usedMemoryMB", 0))
        vc = int(total.get("vCores") or 0) or int(node.get("availableVirtualCores", 0)) + int(
            node.get("usedVirtualCores", 0))
        for label in (node.get("nodeLabels") or [""]):
            have = totals.get(label, (0, 0))
            totals[label] = (have[0] + mem, have[1] + vc)
    return totals


def _spread_hosts(job: JobSpec, nodes: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The running hosts of the default partition each spread type may use: as many as its tasks, at least."""
    hosts = sorted({str(n.get("nodeHostName")) for n in nodes
                    if n.get("state") == "RUNNING" and not n.get("nodeLabels") and n.get("nodeHostName")})
    for type_ in job.spread:
        wanted = job.tasks[type_].instances
        if wanted > len(hosts):
            raise UsageError(f"spread: {type_} asks {wanted} hosts, one per task; the cluster's default partition "
                             f"has {len(hosts)} running host(s); allowed: at most {len(hosts)} {type_} tasks")
    return {type_: hosts for type_ in job.spread}


def _gpus_of(node: dict[str, Any]) -> int:
    infos = ((node.get("totalResource") or {}).get("resourceInformations") or {}).get("resourceInformation") or []
    return sum(int(i.get("value", 0)) for i in infos if i.get("name") == "yarn.io/gpu")
