"""The AM's registry: who registered where, the gang barrier, heartbeats, exit codes.

Pure state with no YARN and no HTTP in it, so the lifecycle, the HTTP server
and the benchmark all drive the same code.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from tony_airflow.core.am import spares as spare_rules
from tony_airflow.core.am.rendezvous import Rendezvous
from tony_airflow.core.am.training import TrainingStore
from tony_airflow.core.history import events as ev
from tony_airflow.core.protocol import Progress, TaskStatus, elastic_rendezvous
from tony_airflow.core.spec import JobSpec

REQUESTED, ALLOCATED, REGISTERED, RUNNING, SUCCEEDED, FAILED, STOPPED = (
    TaskStatus.REQUESTED, TaskStatus.ALLOCATED, TaskStatus.REGISTERED, TaskStatus.RUNNING, TaskStatus.SUCCEEDED,
    TaskStatus.FAILED, TaskStatus.STOPPED)
DONE = frozenset({SUCCEEDED, FAILED, STOPPED})
log = logging.getLogger("tony.am.registry")


@dataclass
class TaskState:
    type: str
    index: int
    attempt: int
    role: str
    status: TaskStatus = REQUESTED
    container_id: str = ""       # skein's id, e.g. "worker-0_3"
    yarn_container_id: str = ""
    host: str = ""
    port: int = 0
    exit_code: int | None = None
    stderr_tail: str = ""
    yarn_diagnostics: str = ""   # YARN's word on how the container ended (e.g. memory limits)
    memory_killed: bool = False  # the executor's word: its container engine killed it for its memory limit
    ended_unreported: bool = False  # YARN said its container ended before the executor's own report came
    requested_at: float = field(default_factory=time.time)
    allocated_at: float | None = None
    registered_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    last_heartbeat: float | None = None
    stop_requested: bool = False
    gpu_indices: list[int] = field(default_factory=list)
    node_http: str = ""          # the NodeManager's web address (container logs while running)
    peak_rss_kib: int = 0        # sampled by the executor over the user's process tree
    gpu_util_max: float | None = None

    @property
    def id(self) -> str:
        return f"{self.type}:{self.index}"

    @property
    def done(self) -> bool:
        return self.status in DONE


Listener = Callable[..., Any]  # (event name, **fields), e.g. EventLog.emit


async def first_set(timeout: float, *events: asyncio.Event) -> None:
    """Until one of `events` is set, at most `timeout` s (a long poll's wait). The waiters go with it, also when
    the request that waits is cancelled (its client gone)."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


class Registry:
    """One attempt at a time; a request for an older attempt is refused.

    Every task transition is also told to `listener` as a history event.
    """

    def __init__(self, job: JobSpec, app_id: str, listener: Listener | None = None):
        self.listener = listener
        self.job = job
        self.app_id = app_id
        self.attempt = 0
        self.allowed_attempts = job.max_attempts  # grows with each retry that did not count (master.py)
        self.tasks: dict[tuple[str, int], TaskState] = {}
        self.history: list[dict[str, Any]] = []
        self._spec: dict[str, Any] | None = None
        self._ready_answer = b""     # the spec's answer, serialized once per attempt for every waiter
        self._unregistered = 0       # tasks of the attempt not registered yet: the gang forms at 0
        self._spec_ready = asyncio.Event()
        self._attempt_over = asyncio.Event()
        self.changed = asyncio.Event()
        self._stop_news = asyncio.Event()  # set (and renewed) whenever a task may have to be told 'stop'
        self._gpus_in_use: dict[str, set[int]] = {}
        self._released: set[str] = set()  # YARN containers the gang gave back: their messages are stale
        self._withdrawn: set[tuple[str, int]] = set()  # tasks a gang released and has not asked for again
        self.waiting = ""                 # why the gang waits (core/am/gang.py), shown in the progress line
        self.notice = ""                  # an elastic job's latest lost or replaced worker (core/am/elastic.py)
        self.sealed_hdfs_token = ""       # the newest HDFS token from the job's keytab, sealed (token_renewal.py)
        self.rendezvous: Rendezvous | None = None  # an elastic job's torchrun rendezvous (core/am/rendezvous.py)
        self.training = TrainingStore(listener)  # how far the training is, from the programs' reports
        self.spares: spare_rules.Spares | None = None  # an elastic job's spares (core/am/spares.py)
        self._spare_told = asyncio.Event()  # a spare was told to take a place: every waiting spare looks again

    # ------------------------------------------------------------- attempts
    def new_attempt(self, attempt: int) -> None:
        if self.tasks:
            self.history.append({"attempt": self.attempt, "tasks": [asdict(t) for t in self.tasks.values()]})
        self.attempt = attempt
        self.tasks = {
            (t, i): TaskState(t, i, attempt, self.job.tasks[t].role) for t, i in self.job.task_ids()
        }
        self._spec = None
        self._ready_answer = b""
        self._unregistered = len(self.tasks)
        self._spec_ready = asyncio.Event()
        self._attempt_over = asyncio.Event()
        self._gpus_in_use = {}
        self._withdrawn = set()
        self.waiting = ""
        self.notice = ""
        self._tell_stop()  # the old attempt's tasks are told at once
        self.rendezvous = None
        if self.job.elastic_max and elastic_rendezvous(self.job.env) == "tony":
            chief = "master:0" if "master" in self.job.tasks else "worker:0"
            others = sum(self.job.tasks[t].instances for t in self.job.cluster_types()) - self.job.elastic_max
            self.rendezvous = Rendezvous(f"{self.app_id}-{attempt}", self.job.elastic_min + others,
                                         self.job.elastic_max + others, chief=chief,
                                         handover=self.job.output_path.startswith("hdfs:"))
        self.spares = (spare_rules.Spares(self.job.spares, self.job.max_free_retries)
                       if self.job.elastic_max and self.job.spares else None)
        self.training.new_attempt(attempt)
        self._notify()

    def writer_of(self, type_: str, index: int, container_id: str) -> bool | None:
        """Whether this task's container holds the output's writer role (an elastic job with the AM's
        rendezvous: rank 0's container, which may have moved from the chief's); None: the task's own rule
        (IS_CHIEF) decides."""
        if self.rendezvous is None:
            return None
        return self.rendezvous.writer_of(f"{type_}:{index}", container_id)

    def writer_handover(self, container_id: str) -> int:
        """The heartbeat's word to the container that became rank 0 when the writer's was lost: the round of
        the handover it must take (its confirmation carries it back), 0 when none."""
        rdzv = self.rendezvous
        return rdzv.taking_round if rdzv is not None and rdzv.must_take(container_id) else 0

    def rendezvous_tick(self, now: float) -> None:
        """The rendezvous' clock (core/am/rendezvous.py), and what the AM says of it: a writer role that moved
        goes to the history in one line, and the new holder's held heartbeat is answered at once."""
        rdzv = self.rendezvous
        if rdzv is None:
            return
        rdzv.tick(now, self.gone_containers())
        for move in rdzv.drain_moves():
            line = move.line()
            log.warning("attempt %d: %s", self.attempt, line)
            if self.listener is not None:
                self.listener(ev.WRITER_MOVED, attempt=self.attempt, task=move.to_task, container_id=move.to_container,
                              from_task=move.from_task, from_container=move.from_container, round=move.number,
                              line=line)
            self._tell_stop()

    def gone_containers(self) -> set[str]:
        """YARN containers whose tasks are over or that the AM gave back: their torchrun agents are gone."""
        return set(self._released) | {t.yarn_container_id for t in self.tasks.values()
                                      if t.done and t.yarn_container_id}

    def release(self, keys: list[tuple[str, int]], yarn_container_ids: set[str]) -> None:
        """The gang gives these tasks' containers back to YARN (wait-die, core/am/gang.py): one step, taken
        before the AM's first kill. The tasks are withdrawn: no registration completes the gang until it
        asks again (`ask_again`), also from a container YARN allocates while the kills are under way (the
        race the gang model found: the spec went out, then the release failed the job). Whatever the
        released containers still send is ignored. Only before the cluster spec."""
        assert self._spec is None, "a gang whose spec is published is never released"
        self._withdrawn.update(keys)
        if self.rendezvous is not None:  # the writer role goes with its container (the chief's next one claims)
            self.rendezvous.released(set(yarn_container_ids) | {self.tasks[key].yarn_container_id for key in keys})
        self.forget_containers(yarn_container_ids)
        for key in keys:
            task = self.tasks[key]
            if task.yarn_container_id:
                self._released.add(task.yarn_container_id)
            if task.registered_at is not None:
                self._unregistered += 1
            self._release_gpus(task)
            self.tasks[key] = TaskState(task.type, task.index, task.attempt, task.role)
        self._notify()
        self._tell_stop()

    def forget_containers(self, yarn_container_ids: set[str]) -> None:
        """Containers given back to YARN (their ids known once the kills are done): never heard again."""
        self._released.update(c for c in yarn_container_ids if c)
        self._tell_stop()  # a held heartbeat of one of them is told 'stop' now

    def ask_again(self, keys: list[tuple[str, int]]) -> None:
        """A released gang asks YARN for its containers again: their tasks may register again."""
        self._withdrawn.difference_update(keys)

    def replace(self, key: tuple[str, int]) -> TaskState:
        """Elastic (core/am/elastic.py): a lost worker's slot is wanted again inside the running attempt;
        whatever its old container still sends is ignored. Its replacement registers into the published
        cluster spec under its own address and starts at once. Returns the lost task's state."""
        assert self._spec is not None, "only a running attempt's worker is replaced"
        old = self.tasks[key]
        if old.yarn_container_id:
            self._released.add(old.yarn_container_id)
        self._release_gpus(old)
        self.tasks[key] = TaskState(old.type, old.index, old.attempt, old.role)
        self._unregistered += 1
        self._notify()
        self._tell_stop()
        return old

    def take_spare(self, key: tuple[str, int]) -> spare_rules.Spare | None:
        """A lost worker's place (after `replace`) goes to the spare waiting longest, told at once (never one not
        heard from lately: core/am/spares.py)."""
        spare = self.spares.take(key, time.time()) if self.spares is not None else None
        if spare is not None:
            self.tasks[key].container_id = spare.container_id
            told, self._spare_told = self._spare_told, asyncio.Event()
            told.set()
        return spare

    async def wait_spare(self, spare_id: str, attempt: int, host: str, container_id: str,
                         timeout: float) -> tuple[str, int | None]:
        """A spare's long poll: (TAKE, index) once it is told a place, (WAIT, None) after `timeout`, (STOP, None)
        when the attempt is over or the AM holds no such spare. Its first call says it waits (SPARE_WAITING)."""
        spares = self.spares
        if attempt != self.attempt or spares is None or self._attempt_over.is_set():
            return spare_rules.STOP, None
        if spares.waits(spare_id, host, container_id, time.time()):
            spare = spares.by_id[spare_id]
            if self.listener is not None:
                self.listener(ev.SPARE_WAITING, attempt=attempt, spare=spare_id, host=host, container_id=container_id,
                              line=spare_rules.waited_line(spare, time.time()))
            self._notify()
        state, index = spares.answer(spare_id)
        if state == spare_rules.WAIT:
            await first_set(timeout, self._spare_told, self._attempt_over)
            if self._attempt_over.is_set() or attempt != self.attempt:
                return spare_rules.STOP, None
            state, index = spares.answer(spare_id)  # (the wait's end is no word from it: only a request is)
        return state, index

    @property
    def ending(self) -> bool:
        """The attempt is over: what still runs was told to stop."""
        return self._attempt_over.is_set()

    def is_released(self, container_id: str) -> bool:
        return bool(container_id) and container_id in self._released

    def end_attempt(self) -> None:
        """Wake every executor still waiting for a cluster spec: it will be told to stop."""
        self._attempt_over.set()
        for task in self.tasks.values():
            if not task.done:
                task.stop_requested = True
        self._tell_stop()

    def _notify(self) -> None:
        self.changed.set()

    def _tell_stop(self) -> None:
        """Wake every held heartbeat (`stop_news`): some task may now have to be told 'stop'."""
        self._stop_news.set()
        self._stop_news = asyncio.Event()

    def answer_held(self) -> None:
        """The AM's server is closing: every held heartbeat is answered now, every waiting spare told to stop."""
        self._tell_stop()
        self._attempt_over.set()

    async def stop_news(self, timeout: float) -> None:
        """Until a task may have to stop, at most `timeout` s: a heartbeat is held this long (server.py), so
        the stop reaches the executor at once rather than up to a heartbeat interval later."""
        news = self._stop_news
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(news.wait(), timeout)

    def _event(self, name: str, task: TaskState, **fields: Any) -> None:
        if self.listener is not None:
            self.listener(name, attempt=task.attempt, task=task.id, **fields)

    def _finished_event(self, task: TaskState, reason: str = "") -> None:
        began = task.started_at or task.registered_at or task.allocated_at or task.requested_at
        tail = task.stderr_tail.strip().splitlines()[-5:]
        self._event(ev.TASK_FINISHED, task, status=task.status, exit_code=task.exit_code, host=task.host,
                    container_id=task.yarn_container_id,
                    duration_s=round((task.finished_at or time.time()) - began, 3),
                    peak_rss_kib=task.peak_rss_kib, gpu_util_max=task.gpu_util_max,
                    stderr_tail="\n".join(tail)[-1000:], reason=reason)

    # --------------------------------------------------------- from executors
    def _task(self, type_: str, index: int, attempt: int) -> TaskState | str:
        if attempt != self.attempt:
            return f"attempt {attempt} is over; the current attempt is {self.attempt}"
        task = self.tasks.get((type_, index))
        if task is None:
            return f"no task {type_}:{index} in this job"
        return task

    def register(self, type_: str, index: int, attempt: int, host: str, port: int,
                 container_id: str = "") -> str | None:
        """None on success, else why the registration is refused."""
        task = self._task(type_, index, attempt)
        if isinstance(task, str):
            return task
        if self.is_released(container_id):
            return f"container {container_id} was given back to YARN: its gang waits for others to finish"
        if (type_, index) in self._withdrawn:
            return f"{task.id}'s containers are being given back to YARN: its gang waits for others to finish"
        if task.done or task.stop_requested:
            return f"{task.id} is no longer wanted"
        if task.registered_at is not None and (task.host, task.port) != (host, port):
            return f"{task.id} is already registered at {task.host}:{task.port}"
        task.host, task.port = host, int(port)
        wanted = self.job.tasks[type_].gpus
        if wanted and not task.gpu_indices:
            # YARN counts GPUs per node but does not say which: hand out distinct indices per host.
            used = self._gpus_in_use.setdefault(host, set())
            task.gpu_indices = [i for i in range(len(used) + wanted) if i not in used][:wanted]
            used.update(task.gpu_indices)
        if container_id:
            task.container_id = task.container_id or container_id
            task.yarn_container_id = task.yarn_container_id or container_id
        self.writer_of(type_, index, container_id)  # the chief's first container takes the writer role
        now = time.time()
        first = task.registered_at is None
        task.registered_at = task.registered_at or now
        task.allocated_at = task.allocated_at or now
        task.last_heartbeat = now
        if task.status in (REQUESTED, ALLOCATED):
            task.status = REGISTERED
        if first:
            self._unregistered -= 1
            self._event(ev.TASK_REGISTERED, task, host=host, port=int(port), container_id=task.yarn_container_id)
        if first and self._spec is not None:  # an elastic replacement joins the running attempt (replace)
            self._spec["hosts"][type_][index] = f"{host}:{int(port)}"
            self._ready_answer = json.dumps({"state": "ready", "spec": self._spec}).encode()
            task.status, task.started_at = RUNNING, now
            self._event(ev.TASK_STARTED, task)
        if self._spec is None and self._unregistered == 0:
            self._spec = self._build_spec()
            self._ready_answer = json.dumps({"state": "ready", "spec": self._spec}).encode()
            for t in self.tasks.values():
                if t.status == REGISTERED:
                    t.status = RUNNING
                    t.started_at = now
                    self._event(ev.TASK_STARTED, t)
            self._spec_ready.set()
        self._notify()
        return None

    def _build_spec(self) -> dict[str, Any]:
        hosts = {t.name: [f"{self.tasks[(t.name, i)].host}:{self.tasks[(t.name, i)].port}" for i in range(t.instances)]
                 for t in self.job.tasks.values()}
        return {"app_id": self.app_id, "attempt": self.attempt, "hosts": hosts}

    @property
    def spec_published(self) -> bool:
        return self._spec is not None

    @property
    def ready_answer(self) -> bytes:
        """`{"state": "ready", "spec": …}` as sent to every executor of the attempt (serialized once:
        once per waiter made the gang's start O(n²) in the number of tasks)."""
        return self._ready_answer

    async def wait_spec(self, attempt: int, timeout: float, task: tuple[str, int] | None = None,
                        container_id: str = "") -> tuple[str, dict[str, Any] | None]:
        """('ready', spec), ('wait', None) after `timeout`, or ('stop', None) when the attempt is over
        or the asking container was given back to YARN (its slot is another container's now).

        A task waiting for its gang is alive: the wait counts as a heartbeat, so a gang
        that forms slowly is governed by the allocation and registration timeouts.
        """
        if attempt != self.attempt or self.is_released(container_id):
            return "stop", None
        self._alive(task)
        spec_ready, over = self._spec_ready, self._attempt_over
        if not spec_ready.is_set() and not over.is_set():
            await first_set(timeout, spec_ready, over)
        if over.is_set() or attempt != self.attempt or self.is_released(container_id):
            return "stop", None
        self._alive(task)
        if spec_ready.is_set():
            return "ready", self._spec
        return "wait", None

    def _alive(self, key: tuple[str, int] | None) -> None:
        task = self.tasks.get(key) if key is not None else None
        if task is not None and task.registered_at is not None:
            task.last_heartbeat = time.time()

    def heartbeat(self, type_: str, index: int, attempt: int, usage: dict[str, Any] | None = None,
                  container_id: str = "", took_writer: int = 0) -> str:
        """'run' or 'stop' (the AM wants this task to end); the task is alive. `took_writer`: its container
        took the output's writer role in the handover of that round (claimed, pulled, adopted): that handover
        ends (only the word of the one under way does)."""
        task = self._task(type_, index, attempt)
        if not isinstance(task, str):
            task.last_heartbeat = time.time()
            self._record_usage(task, usage)
            if took_writer and self.rendezvous is not None and self.rendezvous.took(container_id, took_writer):
                log.info("attempt %d: %s (container %s) took the output's writer role", attempt, task.id,
                         container_id)
                self._notify()
        return self.answer(type_, index, attempt, container_id)

    def running(self, type_: str, index: int, attempt: int) -> bool:
        """The task is of this attempt and has not reported its end."""
        task = self._task(type_, index, attempt)
        return not isinstance(task, str) and not task.done

    def answer(self, type_: str, index: int, attempt: int, container_id: str = "") -> str:
        """What a heartbeat is told: 'stop' or 'run' (no side effect: a held heartbeat asks again)."""
        task = self._task(type_, index, attempt)
        if isinstance(task, str) or self.is_released(container_id) or (type_, index) in self._withdrawn:
            return "stop"
        return "stop" if task.stop_requested else "run"

    def _release_gpus(self, task: TaskState) -> None:
        self._gpus_in_use.get(task.host, set()).difference_update(task.gpu_indices)

    def gpus_of(self, type_: str, index: int) -> list[int]:
        task = self.tasks.get((type_, index))
        return list(task.gpu_indices) if task else []

    @staticmethod
    def _record_usage(task: TaskState, usage: dict[str, Any] | None) -> None:
        """Keep the peaks the executor sampled (resident memory, GPU utilisation)."""
        if not usage:
            return
        task.peak_rss_kib = max(task.peak_rss_kib, int(usage.get("peak_rss_kib") or 0))
        gpu = usage.get("gpu_util_max")
        if gpu is not None:
            task.gpu_util_max = max(task.gpu_util_max or 0.0, float(gpu))

    def finished(self, type_: str, index: int, attempt: int, exit_code: int, stderr_tail: str = "",
                 usage: dict[str, Any] | None = None, container_id: str = "", memory_killed: bool = False) -> None:
        task = self._task(type_, index, attempt)
        if isinstance(task, str) or self.is_released(container_id) or (type_, index) in self._withdrawn:
            return
        if task.done:
            own = not container_id or container_id == task.yarn_container_id
            if task.ended_unreported and own:  # the report YARN's word came before (a quiet executor is not waited
                # for, #54): the ending stands, the report's details tell why (the command's stderr, a memory kill)
                task.stderr_tail = task.stderr_tail or stderr_tail[-4000:]
                task.memory_killed = task.memory_killed or bool(memory_killed)
                task.ended_unreported = False
            return
        task.exit_code = int(exit_code)
        task.stderr_tail = stderr_tail[-4000:]
        task.memory_killed = bool(memory_killed)
        self._record_usage(task, usage)
        self._release_gpus(task)
        task.finished_at = time.time()
        if task.stop_requested:
            task.status = STOPPED
        else:
            task.status = SUCCEEDED if exit_code == 0 else FAILED
        self._finished_event(task)
        self._notify()

    def training_report(self, type_: str, index: int, attempt: int, report: dict[str, Any] | None,
                        refused: dict[str, Any] | None, source: str = "report", container_id: str = "") -> str | None:
        """A task's relayed progress report and its endpoint's refusals: None, or why it was not taken."""
        self.training.count_refused(refused)
        task = self._task(type_, index, attempt)
        if isinstance(task, str):
            return task
        if self.is_released(container_id):
            return f"container {container_id} was given back to YARN"
        if report is None:
            return None
        return self.training.receive(task.id, attempt, report, source)

    # ------------------------------------------------------------ from YARN
    def container_allocated(self, key: tuple[str, int], yarn_container_id: str, node_http: str = "") -> None:
        task = self.tasks[key]
        task.yarn_container_id = task.yarn_container_id or yarn_container_id
        task.node_http = task.node_http or node_http
        if task.allocated_at is None:
            task.allocated_at = time.time()
            self._event(ev.TASK_ALLOCATED, task, container_id=task.yarn_container_id, node_http=task.node_http)
        if task.status == REQUESTED:
            task.status = ALLOCATED
            self._notify()

    def container_message(self, key: tuple[str, int], message: str) -> None:
        """YARN's diagnostics for a container that ended, kept beside the executor's own report."""
        task = self.tasks[key]
        text = " ".join((message or "").split())
        if text and not task.yarn_diagnostics:
            task.yarn_diagnostics = text
            self._notify()

    def container_gone(self, key: tuple[str, int], message: str) -> None:
        """The container ended without the executor reporting an exit code."""
        task = self.tasks[key]
        if task.done:
            return
        task.exit_code = _exit_code_of(message)
        task.ended_unreported = True
        task.yarn_diagnostics = task.yarn_diagnostics or " ".join(message.split())
        self._release_gpus(task)
        task.finished_at = time.time()
        task.status = STOPPED if task.stop_requested else FAILED
        self._finished_event(task, reason=message)
        self._notify()

    def abandon(self, reason: str) -> None:
        """The AM is ending without these tasks' reports: record them as stopped, not running."""
        self.request_stop()
        for key, task in self.tasks.items():
            if not task.done:
                self.container_gone(key, reason)

    def request_stop(self) -> None:
        for task in self.tasks.values():
            if not task.done:
                task.stop_requested = True
        self._tell_stop()

    # -------------------------------------------------------------- views
    def counts(self) -> dict[str, int]:
        tasks = self.tasks.values()
        return {
            "total": len(self.tasks),
            "allocated": sum(t.allocated_at is not None for t in tasks),
            "registered": sum(t.registered_at is not None for t in tasks),
            "running": sum(t.status == RUNNING for t in tasks),
            "finished": sum(t.done for t in tasks),
        }

    def progress(self) -> Progress:
        """How far the AM got, for clients (`/progress.json`)."""
        n = self.counts()
        return Progress(attempt=self.attempt, max_attempts=self.allowed_attempts,
                        spec_published=self.spec_published, waiting=self.waiting, notice=self.notice,
                        ending=self._attempt_over.is_set(), total=n["total"], allocated=n["allocated"],
                        registered=n["registered"], running=n["running"], finished=n["finished"])

    def status(self) -> dict[str, Any]:
        return {
            "app_id": self.app_id,
            "name": self.job.name,
            "attempt": self.attempt,
            "max_attempts": self.allowed_attempts,
            "counts": self.counts(),
            "spec_published": self.spec_published,
            "tasks": [asdict(t) for t in self.tasks.values()],
            "previous_attempts": self.history,
            "training": self.training.training,
            "training_refused": dict(self.training.refused),
        }


def _exit_code_of(message: str) -> int:
    """YARN's diagnostics carry 'Exit code: N'; -100 is YARN's own 'aborted'."""
    marker = "Exit code:"
    if marker in message:
        try:
            return int(message.split(marker, 1)[1].split()[0])
        except (ValueError, IndexError):
            pass
    return -100
