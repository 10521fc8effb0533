"""The executor's life: reserve a port, register, wait for the cluster spec,
set the task environment, run the user command, heartbeat, report the exit code.
"""

from __future__ import annotations

import gzip
import http.client
import json
import logging
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tony_airflow.core import protocol
from tony_airflow.core.executor import engine
from tony_airflow.core.executor.admin_rules import AdminRules, engine_mount
from tony_airflow.core.executor.boot import Lookup
from tony_airflow.core.executor.child import UserProcess
from tony_airflow.core.executor.output_commit import Mirror, is_hdfs
from tony_airflow.core.executor.output_tee import OutputTee, container_log_dir
from tony_airflow.core.executor.port import PortReservation
from tony_airflow.core.executor.spare import wait_for_place
from tony_airflow.core.executor.spare_command import PLACE_FILE, EarlyCommand, is_torchrun
from tony_airflow.core.executor.staging import stage_input
from tony_airflow.core.executor.status_channel import Relay, StatusEndpoint, program_env, ship_helper
from tony_airflow.core.executor.tensorboard_scalars import TensorBoardScalars
from tony_airflow.core.executor.torchrun_plugin import plugin_dir
from tony_airflow.core.executor.usage import UsageSampler
from tony_airflow.core.protocol import elastic_rendezvous
from tony_airflow.core.runtimes import TaskIdentity, chief_of, task_env
from tony_airflow.core.spec import JobSpec
from tony_airflow.retries import tries

log = logging.getLogger("tony.executor")
STOPPED_BY_AM = 143
AM_LOST_EXIT = 75            # the AM stopped answering: this task gave up (EX_TEMPFAIL)
AM_LOST_DEFAULT_S = 60.0     # when the job has no heartbeat timeout
MAX_CALL_TIMEOUT_S = 10.0    # one heartbeat may not take longer than this
OUTPUT_NOT_PUBLISHED = 74    # the command exited 0, but its output could not reach HDFS (EX_IOERR)
CALL_PAUSE_S = 0.5           # between tries of a call to the AM: none, then 0.5 s, 1 s, ...
REGISTER_WAIT_S = 5.0        # the registration waits this long for the gang (then the cluster-spec long poll)
ENGINE_FAILED = 1            # the container engine could not run the command (core/executor/engine.py)


class RefusedByAM(RuntimeError):
    """The AM answered, and said no (HTTP 4xx): its reason, in one line."""


def _connection_lost(exc: BaseException) -> bool:
    return isinstance(exc, OSError | http.client.HTTPException)


class RegistryClient:
    """Signed HTTP+JSON calls to the AM.

    The standard library's http.client rather than httpx: the executor's imports
    are on every job's start-up path, and httpx was two thirds of them. One
    keep-alive connection per thread (the heartbeat thread has its own).
    """

    def __init__(self, address: str, secret: str, timeout: float = 30.0):
        self.address = address
        self.secret = secret
        self.timeout = timeout
        self._local = threading.local()

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            host, port = self.address.rsplit(":", 1)
            conn = self._local.conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def call(self, method: str, path: str, payload: dict | None = None, retries: int = 5,
             timeout: float | None = None) -> dict:
        body = json.dumps(payload).encode() if payload is not None else b""

        def exchange() -> tuple[int, str]:
            headers = protocol.sign(self.secret, method, path, body)  # a new nonce each try
            headers["Content-Type"] = "application/json"
            headers["Accept-Encoding"] = "gzip"  # the cluster spec of a large gang comes compressed
            try:
                conn = self._connection(timeout or self.timeout)
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                status, raw = resp.status, resp.read()
                if resp.getheader("Content-Encoding") == "gzip":
                    raw = gzip.decompress(raw)  # every member: the AM sends the answer's head apart
                return status, raw.decode(errors="replace")
            except (OSError, http.client.HTTPException):
                self._drop_connection()  # also a keep-alive connection the AM closed: tried again at once
                raise

        status, text = tries(retries, CALL_PAUSE_S, _connection_lost, at_once=True)(exchange)
        if status >= 400:
            try:
                reason = json.loads(text).get("error") or text
            except (ValueError, AttributeError):
                reason = text
            raise RefusedByAM(f"{method} {path.split('?')[0]}: HTTP {status}: {' '.join(str(reason).split())[:300]}")
        return json.loads(text)


def torchrun_plugin_env(env: dict[str, str], where: Path) -> dict[str, str]:
    """An elastic job's torchrun finds the AM's rendezvous (`--rdzv-backend tony`) on its PYTHONPATH and
    signs its requests with the job's secret (core/executor/torchrun_rendezvous.py)."""
    root = plugin_dir(where)
    path = env.get("PYTHONPATH", "")
    return {"PYTHONPATH": f"{root}{os.pathsep}{path}" if path else str(root),
            protocol.RENDEZVOUS_SECRET_ENV: str((where / protocol.SECRET_FILE).absolute())}


class Executor:
    """One task: register, wait for the gang, run the command, heartbeat, report.

    Heartbeats start at registration, so a task waiting for a slow gang is alive
    to the AM. When the AM stops answering for the job's heartbeat timeout, the
    task stops its command and exits with AM_LOST_EXIT: nothing outlives a lost AM.
    """

    def __init__(self, job: JobSpec, me: TaskIdentity, registry: RegistryClient, host: str, local: bool = False,
                 early: EarlyCommand | None = None):
        self.local = local  # client mode: runs in the submitting process, files are where they are
        self.early = early  # a spare's command, started before its place (spare_command.py)
        self.job = job
        self.me = me
        self.registry = registry
        self.host = host
        self.child: UserProcess | None = None
        self.usage: UsageSampler | None = None
        self.stop_requested = threading.Event()
        self.stopped_at: float | None = None  # when a stop began: what changed after it may be torn
        self._sealed_token = ""  # the last HDFS token the AM handed over (sealed), already in use
        self.mirror: Mirror | None = None
        self.writer_by_am: bool | None = None  # elastic: the AM says whether this container writes (not IS_CHIEF)
        self.is_writer = False                 # this container holds the output's writer role (it claimed)
        self._taking = threading.Lock()        # one take-over of the writer role at a time
        self._took_round = 0                   # the handover (its round) this container took last
        self.am_lost = threading.Event()
        self.finished = threading.Event()
        self.give_up_s = job.timeouts.heartbeat or AM_LOST_DEFAULT_S
        self._last_answer = time.monotonic()
        # YARN's container id too: the AM ignores the messages of a container its gang released
        self.ident = {"type": me.type, "index": me.index, "attempt": me.attempt,
                      "container_id": os.environ.get("CONTAINER_ID", "")}

    def run(self) -> int:
        reservation = PortReservation()
        log.info("%s:%d (attempt %d) reserved port %d", self.me.type, self.me.index, self.me.attempt,
                 reservation.port)
        try:
            answer = self.registry.call("POST", f"{protocol.REGISTER}?wait={self._register_wait():g}", {
                **self.ident, "host": self.host, "port": reservation.port})
        except RefusedByAM as exc:
            log.info("the AM does not want this task: %s", exc)
            reservation.release()
            if self.early is not None:
                self.early.end(grace=max(self.job.stop_grace - 2, 1))
            return 0
        self._answered()
        self.writer_by_am = answer.get("writer") if isinstance(answer.get("writer"), bool) else None
        self._take_hdfs_token(answer.get("hdfs_token") or "")  # before staging: the job may outlive its first token
        heartbeats = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        heartbeats.start()
        try:
            return self._run_registered(reservation, answer)
        finally:
            self.finished.set()
            if self.early is not None and self.child is not self.early.process:  # never handed over
                self.early.end(grace=max(self.job.stop_grace - 2, 1))

    def _register_wait(self) -> float:
        """How long the registration may wait for the gang (its answer then holds the cluster spec):
        short enough that the AM hears from this task within half its heartbeat timeout."""
        timeout = self.job.timeouts.heartbeat
        return min(REGISTER_WAIT_S, timeout / 2) if timeout else REGISTER_WAIT_S

    def _run_registered(self, reservation: PortReservation, registered: dict) -> int:
        gpus = registered.get("gpus") or []
        state = registered.get("state")  # the registration's long poll: "ready", "stop", or "wait" (ask again)
        if state == "ready":
            spec = registered.get("spec")
        else:
            spec = None if state == "stop" else self._wait_for_spec()
        if spec is None:
            reservation.release()
            if self.am_lost.is_set():
                return AM_LOST_EXIT
            log.info("the AM ended this attempt before the cluster spec was complete")
            return 0
        env = self._command_env(spec["hosts"])
        mirror, push = self._stage(env)
        self.mirror = mirror
        if any(t.gpus for t in self.job.tasks.values()):
            # YARN does not tell a container which GPUs it got; the AM assigned these.
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in gpus)
        cwd = self._command_cwd()
        command = self.job.command_of(self.me.type)
        if self.me.type == "tensorboard":
            reservation.release()  # TensorBoard does not bind with SO_REUSEPORT
        if self.stop_requested.is_set():
            reservation.release()
            return AM_LOST_EXIT if self.am_lost.is_set() else 0
        channel = self._open_status_channel(env) if self.me.type != "tensorboard" else None
        try:
            return self._run_command(reservation, mirror, push, command, env, cwd, gpus, channel)
        finally:
            self._close_status_channel(channel)

    def _command_env(self, hosts: dict[str, list[str]]) -> dict[str, str]:
        """The command's environment before staging: the container's, the job's, the task's for this cluster."""
        env = with_job_env(os.environ, self.job.env)
        env.update(task_env(self.job, hosts, self.me))
        env.update(self._shipped_files_env())
        if env.get("PET_RDZV_BACKEND") == protocol.RENDEZVOUS_BACKEND:  # elastic: the AM keeps the rendezvous
            env.update(torchrun_plugin_env(env, Path.cwd()))
        if not self.local:
            env.update(container_tmp_env(os.environ, Path.cwd()))
        return env

    def _command_cwd(self) -> str | None:
        src = Path(protocol.SRC_DIR)
        if self.local:
            return self.job.src_dir or None
        return str(src.absolute()) if self.job.src_dir and src.is_dir() else None

    def start_early(self) -> EarlyCommand | None:
        """A spare's command started before its place, when that command is torchrun under the AM's rendezvous
        and runs on the node itself (spare_command.py); None: it starts once placed, as any task's.

        Its environment is the worker's for a cluster not known yet (every task at this host, port 0): torch's
        agent reads its own settings from it (PET_*: the job's and the task type's, none of them the cluster's
        under the AM's rendezvous); its workers get the place's environment, handed over in `_run_command`."""
        command = self.job.command_of(self.me.type)
        if (self.local or self.job.framework != "pytorch" or not self.job.elastic_max
                or elastic_rendezvous(self.job.env) != protocol.RENDEZVOUS_BACKEND
                or (self.job.image_of(self.me.type) and self.job.docker_runtime == "engine")
                or not is_torchrun(command)):
            return None
        hosts = {t: [f"{self.host}:0"] * spec.instances for t, spec in self.job.tasks.items()}
        return EarlyCommand(command, self._command_env(hosts), self._command_cwd(), Path.cwd() / PLACE_FILE)

    def _open_status_channel(self, env: dict[str, str]) -> tuple[StatusEndpoint, Relay, Path] | None:
        """Where the program reports how far it is (core/executor/status_channel.py); a channel that cannot
        be opened is said once and the task runs without it."""
        try:
            endpoint = StatusEndpoint().start()
            where = Path(tempfile.mkdtemp(prefix="tony-progress-")) if self.local else Path.cwd()
            helper = ship_helper(where)
            env.update(program_env(endpoint, helper, env))
            output = env.get("DTF_OUTPUT_PATH")
            scalars = TensorBoardScalars(Path(output)) if output and env.get("IS_CHIEF") == "true" else None
            relay = Relay(endpoint, lambda path, body: self.registry.call(
                "POST", path, body, retries=1, timeout=MAX_CALL_TIMEOUT_S), self.ident,
                source=scalars.latest if scalars is not None else None).start()
            return endpoint, relay, where
        except Exception as exc:
            log.warning("the progress channel could not be opened (the task runs without it): %s", exc)
            return None

    def _close_status_channel(self, channel: tuple[StatusEndpoint, Relay, Path] | None) -> None:
        if channel is None:
            return
        endpoint, relay, where = channel
        relay.stop(final=not self.am_lost.is_set())
        endpoint.stop()
        if self.local:
            shutil.rmtree(where, ignore_errors=True)

    def _run_command(self, reservation: PortReservation, mirror: Mirror | None, push: bool, command: str,
                     env: dict[str, str], cwd: str | None, gpus: list[int],
                     channel: tuple[StatusEndpoint, Relay, Path] | None) -> int:
        plan = self._container_plan(command, env, cwd, gpus)
        self._plan = plan
        refused = self._refused_by_admin() if plan is not None else None
        if refused:
            reservation.release()
            return self._end_without_command(mirror, push, f"{self.task_name}: {refused}")
        if plan is not None:
            try:
                engine.preflight(plan.engine, plan.image, self.host, self.task_name)
            except engine.EngineError as exc:
                reservation.release()
                return self._end_without_command(mirror, push, str(exc))
            log.info("starting in %s (%s): %s", plan.image, plan.engine, command)
        else:
            log.info("starting: %s", command)
        tee = OutputTee(self.me.type, self.me.index, self.me.attempt, self._ship_output,
                        None if self.local else container_log_dir()).start()
        # In a container the output goes to its own file (the live output's, aggregated by YARN), not
        # also into the executor's log: `yarn logs` shows it once. Elsewhere (client mode) to this terminal.
        sink = open(os.devnull, "wb") if tee.has_file else None
        if self.early is not None and plan is None and self.early.alive():  # a spare's torchrun, waiting
            log.info("the command started before the place: its agent takes the place's environment")
            self.child = self.early.hand_over(env, tee.write)
        else:
            self.child = UserProcess(command, env, cwd=cwd, on_output=tee.write, stdout_sink=sink,
                                     stderr_sink=sink, argv=plan.argv() if plan else None,
                                     remove=(plan.engine, plan.name) if plan else None)
        self.usage = UsageSampler(self.child.proc.pid, env.get("CUDA_VISIBLE_DEVICES")).start()
        reservation.release_when_bound(self.child.alive)
        if self.stop_requested.is_set():  # a stop that came while the command started
            self.child.stop(grace=max(self.job.stop_grace - 2, 1))
        try:
            code = self.child.wait()
        except BaseException:  # client mode: the submitting process is stopping (Ctrl-C): the chief goes too
            self.child.stop(grace=2.0)
            raise
        ended_at = time.time()
        self.usage.stop()
        self.child.kill_group()
        if plan is not None and self.stop_requested.is_set():  # a container created but never started
            engine.remove(plan.engine, plan.name)
        tee.close()  # all of the output reaches the AM before the task reports its end
        self._close_status_channel(channel)  # and the program's last numbers (closing twice does nothing)
        unpublished = self._finish_output(self.mirror or mirror, push or self.is_writer, code, ended_at)
        if unpublished and code == 0 and not self.stop_requested.is_set():
            code = OUTPUT_NOT_PUBLISHED
        ended_by_engine = plan is not None and bool(code) and not self.stop_requested.is_set()
        engine_line = engine.explain_exit(code, self.child.stderr_tail(), plan, self.host, self.task_name) \
            if ended_by_engine and plan is not None else ""
        # the AM does not replace a memory kill as a lost worker (core/am/elastic.py): exit 137 alone cannot say
        killed_for_memory = ended_by_engine and engine.memory_killed(self.child.stderr_tail())
        if engine_line:
            log.error("%s", engine_line)
        if self.am_lost.is_set():
            log.error("stopped the user command (exit code %d): the AM has not answered for %.0fs",
                      code, self.give_up_s)
            return AM_LOST_EXIT
        if self.stop_requested.is_set():
            log.info("stopped at the AM's request (exit code %d)", code)
        else:
            log.info("user command exited with code %d", code)
        self._report(code, unpublished, engine_line, killed_for_memory)
        return 0 if self.stop_requested.is_set() else code

    @property
    def task_name(self) -> str:
        return f"{self.me.type}:{self.me.index}"

    def _container_plan(self, command: str, env: dict[str, str], cwd: str | None,
                        gpus: list[int]) -> engine.ContainerPlan | None:
        """How the command runs in its image (docker_runtime: engine), or None: on the node itself."""
        image = self.job.image_of(self.me.type)
        if not image or self.job.docker_runtime != "engine" or self.local:
            return None
        workdir = Path.cwd()
        task = self.job.tasks[self.me.type]
        container = os.environ.get("CONTAINER_ID", "")
        me = self.me
        local_paths = self._local_data_paths()
        return engine.ContainerPlan(
            engine=self.job.docker_engine, image=image,
            name=f"tony-{container or f'{me.app_id}-{me.type}-{me.index}-a{me.attempt}'}",
            workdir=cwd or str(workdir), command=command,
            env_names=engine.env_names(env, os.environ, self.job.env),
            mounts=engine.mounts(workdir, env, local_paths, [engine_mount(m) for m in self.job.docker_mounts]),
            memory_mb=task.memory_of(me.index), vcores=task.vcores_of(me.index),
            user=self.job.docker_user or f"{os.getuid()}:{os.getgid()}",
            labels={engine.LABEL: "1", f"{engine.LABEL}.application": me.app_id,
                    f"{engine.LABEL}.container": container, f"{engine.LABEL}.task": self.task_name,
                    f"{engine.LABEL}.attempt": str(me.attempt), f"{engine.LABEL}.workdir": str(workdir)},
            gpus=gpus if task.gpus else [], home=str(workdir), ulimits=engine.node_ulimits(),
            runtime=engine.podman_runtime() if self.job.docker_engine == "podman" else "",
        )

    def _local_data_paths(self) -> list[tuple[str, str]]:
        """The job's local input (ro) and output (rw): host paths the user chose, mounted as they are."""
        return [(p, mode) for p, mode in ((self.job.input_path, "ro"), (self.job.output_path, "rw"))
                if p and not is_hdfs(p)]

    def _refused_by_admin(self) -> str | None:
        """What the node's admin does not allow of the mounts `--mount` adds and of `--docker-user`
        (core/executor/admin_rules.py). The job's own local --input (ro) and --output (rw) are not the
        admin's: mounted as the YARN container's own user, they give the rights a task without an image has."""
        rules = AdminRules.load(os.environ.get("HADOOP_CONF_DIR"))
        return rules.refusal(list(self.job.docker_mounts), self.job.docker_user, f"{os.getuid()}:{os.getgid()}")

    def _end_without_command(self, mirror: Mirror | None, push: bool, reason: str) -> int:
        """The command could not start (its container engine said no): the attempt fails with `reason`."""
        log.error("%s", reason)
        self._finish_output(self.mirror or mirror, push or self.is_writer, ENGINE_FAILED, time.time())
        if self.am_lost.is_set():
            return AM_LOST_EXIT
        self._report(ENGINE_FAILED, "", reason)
        return 0 if self.stop_requested.is_set() else ENGINE_FAILED

    def _finish_output(self, mirror: Mirror | None, push: bool, code: int, ended_at: float) -> str:
        """The last push of the output; '' or why it could not be published (one line).

        The rule (docs/submitting.md, "What a job's output survives"): a command that exited 0 by itself has
        written everything, so everything is published; after a stop or a failure only what the program closed
        `mirror.settle_s` before the end (under the quiet rule: left unchanged that long), so that what
        the end tore never replaces the last good copy. A task whose AM is gone publishes nothing: a newer
        attempt may be writing."""
        if mirror is None:
            return ""
        if self.am_lost.is_set():
            mirror.halt()
            return ""
        if not push:
            mirror.stop()
            return ""
        clean = code == 0 and not self.stop_requested.is_set()
        try:
            if clean:
                mirror.finish(math.inf)
            else:  # the mirror subtracts its settle time once it has read the last events (a loss among them)
                mirror.finish(ended_at=min(self.stopped_at or ended_at, ended_at))
        except Exception as exc:
            reason = f"the output could not be published to {mirror.uri}: {' '.join(str(exc).split())[:300]}"
            log.error("%s", reason)
            return reason
        return ""

    def _answered(self) -> None:
        self._last_answer = time.monotonic()

    def _silent_for(self) -> float:
        return time.monotonic() - self._last_answer

    def _wait_for_spec(self) -> dict | None:
        path = (f"{protocol.CLUSTER_SPEC}?attempt={self.me.attempt}&type={self.me.type}&index={self.me.index}"
                f"&wait=20&container={quote(str(self.ident['container_id']))}")
        while not self.stop_requested.is_set():
            try:
                answer = protocol.ClusterSpecAnswer(**self.registry.call("GET", path, retries=2))
            except (OSError, http.client.HTTPException) as exc:
                if self._silent_for() > self.give_up_s:
                    self._lose_am(exc)
                    return None
                time.sleep(min(self.job.heartbeat_interval, 1.0))
                continue
            self._answered()
            if answer.state == "ready":
                return answer.spec
            if answer.state == "stop":
                return None
        return None

    def _lose_am(self, exc: BaseException) -> None:
        if not self.am_lost.is_set():
            log.error("the AM at %s has not answered for %.0fs (last error: %s): stopping this task",
                      self.registry.address, self._silent_for(), exc)
            self.am_lost.set()
            if self.mirror is not None:
                self.mirror.halt()
            self.stop("the AM is gone")

    def stop(self, reason: str) -> None:
        """Stop this task: the AM's word, a lost AM, or client mode's watcher."""
        if self.stop_requested.is_set():
            return
        log.info("stopping: %s", reason)
        self.stopped_at = self.stopped_at or time.time()
        self.stop_requested.set()
        if self.child is not None:
            threading.Thread(target=self.child.stop, args=(max(self.job.stop_grace - 2, 1),), daemon=True).start()

    def _stage(self, env: dict[str, str]) -> tuple[Mirror | None, bool]:
        """HDFS input copied in; HDFS output mirrored (pushed by the chief, pulled by readers)."""
        if self.job.input_path and is_hdfs(self.job.input_path):
            env["DTF_INPUT_URI"] = self.job.input_path
            where = f"{protocol.INPUT_DIR}-{self.me.app_id}" if self.local else protocol.INPUT_DIR
            env["DTF_INPUT_PATH"] = stage_input(self.job.input_path, Path(where))
        if not (self.job.output_path and is_hdfs(self.job.output_path)):
            return None, False
        local_dir = Path(f"{protocol.OUTPUT_DIR}-{self.me.app_id}" if self.local else protocol.OUTPUT_DIR)
        me = self.me
        name = f"{me.app_id}.a{me.attempt}.{me.type}{me.index}"
        if self.writer_by_am is not None:  # elastic: the role moves between containers of one attempt, and a
            # claim fences another writer of the same attempt by its name (output_protocol._fence): its container's
            name += "." + str(self.ident["container_id"]).rsplit("_", 1)[-1]
        mirror = Mirror(self.job.output_path, local_dir, writer=name, attempt=(me.app_id, me.attempt))
        # elastic (the AM's rendezvous): the container that holds the writer role, the chief's at first and
        # rank 0's after a loss, never a chief's replacement while the role is elsewhere (core/am/rendezvous.py)
        writer = self.writer_by_am if self.writer_by_am is not None else env.get("IS_CHIEF") == "true"
        self.is_writer = writer
        evaluator = me.type == "evaluator"  # reads the chief's checkpoints, writes its own results
        if writer:
            mirror.claim()  # an older attempt's writer, if one still runs, publishes nothing more
        elif evaluator:
            mirror.join()   # writes under its chief's claim
        # A later attempt resumes from what an earlier one wrote: its checkpoints and files, not the old
        # attempts' event files (TensorBoard reads those from HDFS, and only what it shows).
        if me.type == "tensorboard":
            taken = mirror.pull(only_tensorboard=True)
        elif writer or evaluator or chief_of(json.loads(env.get("CLUSTER_SPEC") or "{}")) is None:
            taken = mirror.pull(events=False)
        else:  # beside the chief (MultiWorkerMirroredStrategy's workers must restore the same checkpoint)
            taken = mirror.pull_as_of_claim(events=False, stopped=self.stop_requested)
        log.info("output %s: %d file(s) taken from HDFS%s", self.job.output_path, taken,
                 f" (writer epoch {mirror.epoch})" if writer else "")
        if writer:
            mirror.adopt()
        env["DTF_OUTPUT_URI"] = self.job.output_path
        env["DTF_OUTPUT_PATH"] = str(mirror.local)
        if writer or evaluator or me.type == "tensorboard":
            mirror.start("push" if writer else "both" if evaluator else "pull",
                         writers=self._command_pids, alive=self._command_runs)
        return mirror, writer or evaluator

    def _command_pids(self) -> list[int]:
        """The user command's processes (its group's first, the guard; everything below it is walked), and a
        container engine's container, whose processes are not below the engine's client."""
        if self.child is None:
            return []
        return [self.child.proc.pid, *self._engine_pids()]

    def _engine_pids(self) -> list[int]:
        plan = getattr(self, "_plan", None)
        if plan is None:
            return []
        if not getattr(self, "_engine_pid", 0):  # asked until the engine has started the container
            self._engine_pid = engine.container_pid(plan.engine, plan.name)
        return [self._engine_pid] if self._engine_pid else []

    def _command_runs(self) -> bool:
        """Whether the command's closes are its own: it runs and no stop has begun (a dying program's files are
        closed by the kernel, torn or not; the end's rule decides about those)."""
        return self.child is not None and not self.stop_requested.is_set() and self.child.proc.poll() is None

    def _shipped_files_env(self) -> dict[str, str]:
        env = {protocol.ENV_PYTHON: self.job.python}
        if self.job.python_venv:  # the packed environment's Python comes first for the user command
            venv = Path(protocol.VENV_DIR).absolute()
            env.update({"VIRTUAL_ENV": str(venv), protocol.ENV_PYTHON: str(venv / "bin" / "python"),
                        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"})
            env.pop("PYTHONHOME", None)
        if self.job.script:
            shipped = Path(self.job.script) if self.local else Path(Path(self.job.script).name)
            env["DTF_TASK_SCRIPT"] = str(shipped.absolute())
        return env

    def _heartbeat_loop(self) -> None:
        """From registration until the task is over: liveness for the AM, and the AM's word back."""
        timeout = min(MAX_CALL_TIMEOUT_S, max(self.give_up_s / 3, 1.0))
        # The AM holds the answer up to `wait` s and answers 'stop' the moment it decides it: the interval is
        # spent waiting on the AM, not asleep (the ps of a finished job stops at once, #54).
        wait = min(self.job.heartbeat_interval, timeout / 2)
        while not self.finished.is_set():
            asked = time.monotonic()
            answer: dict = {}
            try:
                usage = self.usage.report() if self.usage else None
                answer = self.registry.call("POST", protocol.HEARTBEAT, {**self.ident, "usage": usage, "wait": wait},
                                            retries=2, timeout=timeout + wait)
                action = answer["action"]
                self._answered()
                self._take_hdfs_token(answer.get("hdfs_token") or "")
            except Exception as exc:  # the AM decides on missed heartbeats; we decide on a silent AM
                log.warning("heartbeat failed: %s", exc)
                if self._silent_for() > self.give_up_s:
                    self._lose_am(exc)
                    return
                action = "run"
            if action == "stop":
                self.stop("the AM asks this task to stop")
            elif answer_writer(answer):
                threading.Thread(target=self.take_writer_role, args=(answer_writer(answer),), name="take-writer-role",
                                 daemon=True).start()
            self.finished.wait(max(0.0, self.job.heartbeat_interval - (time.monotonic() - asked)))

    def take_writer_role(self, handover: int) -> None:
        """The AM made this container rank 0 in round `handover` after the writer's was lost
        (core/am/rendezvous.py), and every member's round waits: claim the output (a new epoch: the lost
        writer, were it still running, publishes nothing more), take what HDFS holds now (its last published,
        whole checkpoint), adopt it and push from now on, as `_stage` does for a chief; then say so at once,
        tagged with `handover` (the round starts on that word; no other word ends it). Also when this container
        held the role before (the role came back to it): its checkpoint is older than HDFS's and its mirror
        may be fenced (a halt is for ever), so a new mirror claims. A failure is logged and not said: the AM
        fails the attempt after its bound, the next resumes from HDFS. A take racing the task's end (a stop,
        the command over) claims nothing and starts nothing: no push thread nobody finishes, no fence on the
        next attempt's writer."""
        if not self._taking.acquire(blocking=False):
            return  # a take-over under way
        try:
            if self._ending():
                return
            if self._took_round != handover:
                if self.mirror is not None:
                    if not self._take_output():
                        return
                elif self.job.output_path and is_hdfs(self.job.output_path):
                    return  # still staging: the next heartbeat's answer asks again
                self.is_writer = True  # (no output to take: the role is a name)
                self._took_round = handover
            self.registry.call("POST", protocol.HEARTBEAT, {**self.ident, "took_writer": handover}, retries=2,
                               timeout=MAX_CALL_TIMEOUT_S)
        except Exception as exc:
            log.error("could not take the output's writer role: %s", " ".join(str(exc).split())[:300])
        finally:
            self._taking.release()

    def _ending(self) -> bool:
        return self.stop_requested.is_set() or self.finished.is_set()

    def _take_output(self) -> bool:
        """Claim, pull, adopt, push (see `take_writer_role`); False when the task's end came meanwhile."""
        mirror = self.mirror
        assert mirror is not None
        if mirror.fenced or self.is_writer:  # held the role before: its threads and its epoch are over
            mirror.halt()
            mirror = Mirror(mirror.uri, mirror.local, files=mirror.files, writer=mirror.writer,
                            attempt=mirror.attempt, clock=mirror.clock)
            self.mirror = mirror
            self.is_writer = False
        mirror.claim()
        taken = mirror.pull(events=False)
        if self._ending():
            return False
        mirror.adopt()
        if self._ending():
            return False
        mirror.start("push", writers=self._command_pids, alive=self._command_runs)
        log.info("output %s: this container is rank 0 and takes the writer role (epoch %d): %d file(s) "
                 "taken from HDFS", mirror.uri, mirror.epoch, taken)
        return True

    def _take_hdfs_token(self, sealed: str) -> None:
        """A newer HDFS delegation token the AM got from the job's keytab: this process's WebHDFS calls (the
        output mirror, input staging) carry it from now on."""
        if not sealed or sealed == self._sealed_token:
            return
        from tony_airflow.yarn.hdfs import use_hdfs_token

        try:
            use_hdfs_token(protocol.unseal(self.registry.secret, sealed))
        except ValueError as exc:
            log.warning("an HDFS token in the AM's answer could not be read: %s", exc)
            return
        self._sealed_token = sealed
        log.info("using a new HDFS delegation token from the AM")

    def _ship_output(self, offset: int, text: str) -> None:
        self.registry.call("POST", protocol.OUTPUT, {**self.ident, "offset": offset, "text": text},
                           retries=1, timeout=MAX_CALL_TIMEOUT_S)

    def _report(self, code: int, problem: str = "", reason: str = "", memory_killed: bool = False) -> None:
        """`problem`: what went wrong after the command (said after its stderr); `reason`: the one line
        that says why the command failed, instead of its stderr (the container engine's failures);
        `memory_killed`: its container engine killed it for its memory limit (engine.memory_killed)."""
        tail = reason or (self.child.stderr_tail() if self.child else "")
        if problem:
            tail = f"{tail.rstrip()}\ntony: {problem}".lstrip()
        try:
            usage = self.usage.report() if self.usage else None
            body = {**self.ident, "exit_code": code, "stderr_tail": tail, "usage": usage, "memory_killed": memory_killed}
            self.registry.call("POST", protocol.FINISHED, body, timeout=MAX_CALL_TIMEOUT_S)
        except Exception as exc:
            log.warning("could not report the exit code to the AM: %s", exc)

    def on_sigterm(self, signum, frame) -> None:
        """YARN is stopping the container: stop the user's process group, report, exit."""
        log.info("SIGTERM: stopping the user command")
        self.stopped_at = self.stopped_at or time.time()
        self.stop_requested.set()
        if self.child is None:
            sys.exit(STOPPED_BY_AM)
        # Stop from another thread: the main thread is inside Popen.wait(),
        # which returns once the group is gone, and then reports and exits.
        threading.Thread(target=self.child.stop, args=(3.0,), daemon=True).start()


def answer_writer(answer: Mapping[str, object]) -> int:
    """The heartbeat answer's word on the output's writer role: the round of the handover this container must
    take (it became rank 0), or 0."""
    number = answer.get("round")
    return number if answer.get("writer") == "take" and isinstance(number, int) else 0


def with_job_env(environ: Mapping[str, str], job_env: Mapping[str, str]) -> dict[str, str]:
    """The container's environment with the job's own `env` values as the job file has them. YARN writes
    each variable into the container's launch script as `export K="value"` without escaping, and expands
    `{{...}}` in it: a value holding `"` or `}}` (OpenLineage's JSON `OPENLINEAGE_CONTEXT`, issue #52) arrives
    changed; the job file (JSON) carries it exactly. A value that names a variable (`$PATH`, YARN's `{{PWD}}`)
    keeps what the launch script made of it: `--env 'PATH=/opt/bin:$PATH'` means the expansion."""
    return {**environ, **{k: v for k, v in job_env.items() if "$" not in v and "{{" not in v}}


def container_tmp_env(environ: Mapping[str, str], workdir: Path) -> dict[str, str]:
    """TMPDIR for the command: the container's own `tmp` (YARN makes it in the working directory and
    removes it with the container), so what the command leaves there (TensorFlow's autograph
    modules, the user's temporary files) does not pile up in the host's /tmp. A TMPDIR from the job
    or the NodeManager's admin env stays."""
    if "TMPDIR" in environ:
        return {}
    tmp = workdir / "tmp"
    tmp.mkdir(exist_ok=True)
    return {"TMPDIR": str(tmp)}


def identity(env: Mapping[str, str]) -> tuple[TaskIdentity, str]:
    """Which task this container runs, and where the AM's registry is, from the environment."""
    me = TaskIdentity(type=env[protocol.ENV_TASK_TYPE], index=int(env[protocol.ENV_TASK_INDEX]),
                      attempt=int(env[protocol.ENV_ATTEMPT]), app_id=env.get(protocol.ENV_APPLICATION_ID, ""))
    return me, env[protocol.ENV_AM_ADDRESS]


def end_early_on_sigterm(early: EarlyCommand, grace: float) -> Callable[[int, Any], None]:
    """A waiting spare's SIGTERM (YARN ends the spares at the attempt's end, racing the AM's 'stop'): its early
    torchrun is stopped and what it said goes to the spare's own log, then the executor ends (exit 0)."""
    def handler(signum: int, frame: Any) -> None:
        early.end(grace)
        sys.exit(0)
    return handler


def main(lookup: Lookup | None = None) -> None:
    """`lookup`: attempt 1's answer to which task this container runs (core/executor/boot.py)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    job = JobSpec.from_json(Path(protocol.JOB_FILE).read_text())
    secret = Path(protocol.SECRET_FILE).read_text().strip()
    if lookup is not None:
        os.environ.update(lookup.result())
    host = os.environ.get("NM_HOST") or os.uname().nodename
    early = None
    if protocol.ENV_SPARE in os.environ:  # an elastic job's spare: waits to become a lost worker (spare.py)
        registry = RegistryClient(os.environ[protocol.ENV_AM_ADDRESS], secret)
        early = Executor(job, identity(os.environ)[0], registry, host).start_early()  # torch imported meanwhile
        if early is not None:
            signal.signal(signal.SIGTERM, end_early_on_sigterm(early, grace=max(job.stop_grace - 2, 1)))
        index = wait_for_place(registry, os.environ, host, job.timeouts.heartbeat or AM_LOST_DEFAULT_S)
        if index is None:
            if early is not None:
                early.end(grace=max(job.stop_grace - 2, 1))
            sys.exit(0)
        os.environ[protocol.ENV_TASK_INDEX] = str(index)
    me, am_address = identity(os.environ)
    executor = Executor(job, me, RegistryClient(am_address, secret), host, early=early)
    signal.signal(signal.SIGTERM, executor.on_sigterm)
    sys.exit(executor.run())
