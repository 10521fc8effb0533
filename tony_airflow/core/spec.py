"""The job spec: the one data model every front end fills and the AM executes.

Validation lives here (the whole job) and in spec_values.py (one field's
value). Every refusal is a `UsageError` whose one line names the field and
what is allowed.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from tony_airflow.core.spec_values import (
    DOCKER_ENGINES,
    DOCKER_RUNTIMES,
    ENV_NAME,
    MAX_INSTANCES,
    ResourceForms,
    check_data_path,
    check_docker_choice,
    check_docker_user,
    check_history_dir,
    check_image_reference,
    check_packed_env,
    check_src_dir,
    check_type_name,
    parse_count,
    parse_docker_images,
    parse_env_pairs,
    parse_memory_mb,
    parse_mount,
    parse_requirement,
    parse_seconds,
    size_text,
    unknown_name,
)
from tony_airflow.errors import UsageError

# 2 GiB: a ps + 2 workers + TensorBoard job fits one NodeManager, and it is what a small
# TensorFlow task needs (seed-style submitters default to 8192 MiB).
DEFAULT_MEMORY_MB = 2048
# The built-in command of the TensorBoard sidecar that `tensorboard: true` adds.
TENSORBOARD_COMMAND = "exec ${TONY_PYTHON:-python3} -m tony_airflow.core.tensorboard_task"
CLIENT_TYPE = "chief"  # with --client, the chief runs where ytf-submit runs
DEFAULT_TRACKED = ("chief", "worker", "evaluator")
DEFAULT_FREE_RETRIES = 5
DEFAULT_AM_ATTEMPTS = 2  # YARN's own default for yarn.resourcemanager.am.max-attempts, the most it allows
DEFAULT_AM_ATTEMPTS_VALIDITY_S = 3600.0  # a week-long job survives an AM failure every hour or so
MAX_FREE_RETRIES = 100
MAX_SPARES = 64  # waiting containers an elastic job may hold beside its workers
DEFAULT_UNTRACKED = ("ps",)
DEFAULT_SIDECARS = ("tensorboard",)
ROLES = ("tracked", "untracked", "sidecar")
# Bounds that keep nonsense from hanging the client or the AM (docs/submitting.md).
MIN_HEARTBEAT_INTERVAL_S = 0.1
MAX_JOB_FILE_BYTES = 2**20
FRAMEWORKS = ("tensorflow", "pytorch", "generic")
# torchrun's processes per container: one per GPU on the largest nodes sold today (8), with room.
MAX_NPROC_PER_NODE = 64


SECRET_NAME = re.compile(r"(?i)(secret|passw|pwd|token|credential|private|auth|(^|_)(api|access)?_?key(_|$))")
MASK = "********"


def masked_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with the values of names that look secret (…PASSWORD, …TOKEN, …SECRET, API_KEY, …) masked."""
    return {k: MASK if SECRET_NAME.search(k) else v for k, v in env.items()}


@dataclass
class TaskSpec:
    """One task type: how many, how big, where, what it runs, and its lifecycle role."""

    name: str
    instances: int
    memory_mb: int = DEFAULT_MEMORY_MB
    vcores: int = 1
    gpus: int = 0
    node_label: str = ""
    command: str = ""
    role: str = "tracked"
    docker_image: str = ""  # this type's own image ("" : the job's)
    nproc_per_node: int = 1  # processes torchrun starts in each container of this type (PyTorch)
    # per-index overrides of memory and vcores (the `worker[0]:8192` form)
    memory_by_index: dict[int, int] = field(default_factory=dict)
    vcores_by_index: dict[int, int] = field(default_factory=dict)

    def memory_of(self, index: int) -> int:
        return self.memory_by_index.get(index, self.memory_mb)

    def vcores_of(self, index: int) -> int:
        return self.vcores_by_index.get(index, self.vcores)


@dataclass
class Timeouts:
    """Seconds; 0 means no limit. Each one fails the attempt with its own reason."""

    allocation: float = 300.0
    registration: float = 300.0
    heartbeat: float = 60.0
    application: float = 0.0


@dataclass
class JobSpec:
    tasks: dict[str, TaskSpec]
    command: str = ""
    name: str = "tensorflow"  # build_job_spec: default_job_name of the framework and command
    queue: str = "default"
    tags: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    input_path: str = ""
    output_path: str = ""
    script: str = ""
    src_dir: str = ""
    tensorboard: bool = False
    docker_image: str = ""
    # How a task runs in its image: "engine", the executor runs it with the node's container engine
    # (docker or podman, nothing asked of YARN), or "yarn", YARN's Docker runtime (LinuxContainerExecutor).
    docker_runtime: str = "engine"
    docker_engine: str = "docker"
    docker_mounts: list[str] = field(default_factory=list)  # SRC:DST:ro|rw on the node, beside ours
    docker_user: str = ""  # "" : the YARN container's own uid:gid
    python_venv: str = ""  # a packed environment (venv-pack .tar.gz) used as the tasks' Python
    client_mode: bool = False  # the chief runs in the submitting process (--client)
    max_attempts: int = 1
    # Attempts ended by YARN (a preempted container, a lost host) do not count against max_attempts;
    # this many such retries per job (docs/submitting.md, "Attempts"). 5: a busy day's preemptions, not a host that
    # keeps dying under the job for ever.
    max_free_retries: int = DEFAULT_FREE_RETRIES
    # YARN application attempts: a lost AM (its host, its process) starts a new AM that goes on with the job.
    am_attempts: int = DEFAULT_AM_ATTEMPTS
    am_attempts_validity_s: float = DEFAULT_AM_ATTEMPTS_VALIDITY_S  # an AM failure counts this long (0: always)
    timeouts: Timeouts = field(default_factory=Timeouts)
    framework: str = "tensorflow"
    python: str = "python3"
    am_memory_mb: int = 512
    am_vcores: int = 1
    heartbeat_interval: float = 1.0
    stop_grace: float = 10.0
    history_dir: str = ""  # where the AM writes the event log; "" = $TONY_HISTORY_DIR or /tmp/tony-history
    spread: list[str] = field(default_factory=list)  # types placed one task per host (core/placement.py)
    # the hosts each spread type may use, from the RM's node list at submission (filled by the client)
    spread_hosts: dict[str, list[str]] = field(default_factory=dict)
    am_node_label: str = ""  # the AM container's node label expression ("" : the default partition)
    # PyTorch elastic (torchrun's c10d rendezvous): the job runs on as long as MIN..MAX workers live, and the AM
    # replaces a lost worker's container without restarting the others (core/am/elastic.py). 0: not elastic.
    elastic_min: int = 0
    elastic_max: int = 0
    # elastic only: worker containers started beside the workers that wait, executor up, to take a lost
    # worker's place at once (core/am/spares.py); the AM asks for a new one after each. 0: none.
    spares: int = 0

    # ------------------------------------------------------------ views
    def cluster_types(self) -> list[str]:
        """Types that form the distributed cluster (sidecars are not in it)."""
        return [t.name for t in self.tasks.values() if t.role != "sidecar"]

    def task_ids(self) -> list[tuple[str, int]]:
        return [(t.name, i) for t in self.tasks.values() for i in range(t.instances)]

    def local_types(self) -> list[str]:
        """Types that run in the submitting process instead of a YARN container."""
        return [CLIENT_TYPE] if self.client_mode else []

    def command_of(self, type_name: str) -> str:
        return self.tasks[type_name].command or self.command

    def image_of(self, type_name: str) -> str:
        """The image a type's command runs in ("" : on the node itself). The TensorBoard that
        `tensorboard: true` adds is the project's own program and runs on the node unless given an image."""
        task = self.tasks[type_name]
        if task.docker_image:
            return task.docker_image
        return "" if task.command == TENSORBOARD_COMMAND else self.docker_image

    # ----------------------------------------------------- serialisation
    def to_json(self) -> str:
        """The whole spec, as the AM and the executors read it (secrets included: it stays in the
        application's 0700 staging directory)."""
        return self._json(asdict(self))

    def to_record_json(self) -> str:
        """The spec as pages and the history show it: values of `env` names that look secret masked."""
        data = asdict(self)
        data["env"] = masked_env(data["env"])
        return self._json(data)

    @staticmethod
    def _json(data: dict[str, Any]) -> str:
        for task in data["tasks"].values():
            task["memory_by_index"] = {str(k): v for k, v in task["memory_by_index"].items()}
            task["vcores_by_index"] = {str(k): v for k, v in task["vcores_by_index"].items()}
        return json.dumps(data, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        data = json.loads(text)
        tasks = {}
        for name, t in data.pop("tasks").items():
            t["memory_by_index"] = {int(k): v for k, v in t["memory_by_index"].items()}
            t["vcores_by_index"] = {int(k): v for k, v in t["vcores_by_index"].items()}
            tasks[name] = TaskSpec(**t)
        timeouts = Timeouts(**data.pop("timeouts"))
        return cls(tasks=tasks, timeouts=timeouts, **data)

    # -------------------------------------------------------- validation
    def _check_framework_shape(self) -> None:
        """What the framework's cluster cannot express: TF_CONFIG has one chief (or its old name, master)
        and one evaluator; PyTorch's rank 0 is one master."""
        singles = {"tensorflow": ("chief", "master", "evaluator"), "pytorch": ("chief", "master")}
        name = {"tensorflow": "TensorFlow", "pytorch": "PyTorch"}.get(self.framework)
        for kind in singles.get(self.framework, ()):
            count = self.tasks[kind].instances if kind in self.tasks else 0
            if count > 1:
                what = "one master (rank 0)" if self.framework == "pytorch" else f"at most one {kind}"
                more = "" if kind == "evaluator" else " (more tasks go in worker)"
                raise UsageError(f"cluster_requirement: {kind}:{count} — {name} has {what}; allowed: {kind}:1{more}")
        if name and "chief" in self.tasks and "master" in self.tasks:
            raise UsageError(f"cluster_requirement: chief and master — {name} has one chief (master is its old "
                             "name); allowed: one of them")
        self._check_nproc()
        self._check_elastic()

    def _check_elastic(self) -> None:
        """Elastic jobs are torchrun's (PyTorch); MAX is the number of workers asked for, MIN how few may run.
        Their rendezvous (`TONY_ELASTIC_RENDEZVOUS` in env, core/protocol.py): the AM's or torchrun's c10d."""
        chosen = self.env.get("TONY_ELASTIC_RENDEZVOUS")
        if chosen is not None and chosen.strip().lower() not in ("tony", "c10d"):
            raise UsageError(f"env: TONY_ELASTIC_RENDEZVOUS={chosen} — no such rendezvous; allowed: tony (the AM's, "
                             "the default) or c10d (torchrun's, in the rank-0 container)")
        if self.spares and not self.elastic_max:
            raise UsageError(f"spares: {self.spares} — spares take a lost elastic worker's place; allowed: 0, or "
                             "N >= 1 with --elastic MIN:MAX")
        if self.spares and "worker" in self.spread:
            raise UsageError(f"spares: {self.spares} — a spread worker's spare would have no host of its own; "
                             "allowed: 0 with --spread worker")
        worker = self.tasks.get("worker")
        if self.spares and worker is not None and (worker.memory_by_index or worker.vcores_by_index):
            raise UsageError(f"spares: {self.spares} — a spare has the worker type's one size, and these workers "
                             "have per-task memory or vcores; allowed: 0, or one size for every worker")
        if not self.elastic_max:
            return
        shown = f"{self.elastic_min}:{self.elastic_max}"
        if self.framework != "pytorch":
            raise UsageError(f"elastic: {shown} — elastic jobs are torchrun's; allowed: with --framework pytorch")
        if not 1 <= self.elastic_min <= self.elastic_max:
            raise UsageError(f"elastic: {shown} — MIN must be at least 1 and at most MAX; allowed: MIN:MAX with "
                             "1 <= MIN <= MAX workers")
        workers = self.tasks["worker"].instances if "worker" in self.tasks else 0
        if self.elastic_max != workers:
            raise UsageError(f"elastic: {shown} — MAX is the number of workers asked for, and the job asks "
                             f"{workers}; allowed: MIN:{workers}" if workers else
                             f"elastic: {shown} — the job has no worker type; allowed: with -r worker:N")

    def _check_nproc(self) -> None:
        """Several processes per container are torchrun's (core/runtimes.py): PyTorch only, cluster types only,
        and no more processes than the container has GPUs when it has any (each local rank takes one)."""
        for task in self.tasks.values():
            n = task.nproc_per_node
            if n == 1:
                continue
            if self.framework != "pytorch":
                raise UsageError(f"nproc_per_node: {task.name}:{n} — several processes per container are started "
                                 f"by torchrun; allowed: 1 for framework {self.framework}, or --framework pytorch")
            if task.role == "sidecar":
                raise UsageError(f"nproc_per_node: {task.name} is a sidecar, outside torch's world; allowed: 1")
            if task.gpus and n > task.gpus:
                raise UsageError(f"nproc_per_node: {task.name}:{n} — its containers have {task.gpus} GPU(s), one "
                                 f"per process; allowed: at most {task.gpus}")

    def _check_spread(self) -> None:
        """A spread type asks YARN for named hosts, one per task, locality not relaxed."""
        for name in self.spread:
            task = self.tasks.get(name)
            if task is None:
                raise UsageError(f"spread: names unknown type {name!r}; allowed: {', '.join(self.tasks)}")
            if name in self.local_types():
                raise UsageError(f"spread: {name} runs in the submitting process (--client), not on a YARN host")
            if task.memory_by_index or task.vcores_by_index:
                raise UsageError(f"spread: {name} has per-task memory or vcores; allowed: one size per spread type")
            if task.node_label:
                raise UsageError(f"spread: {name} has node_label {task.node_label!r}; YARN takes no node label on a "
                                 "request that names its host (AMRMClient); allowed: spread types in the default "
                                 "partition")

    def validate(self, max_allocation: tuple[int, int] | None = None, check_paths: bool = True) -> JobSpec:
        """Refuse what cannot run, before anything is submitted."""
        if not self.tasks:
            raise UsageError("cluster_requirement: no task types; allowed: e.g. 'ps:1,worker:2'")
        for task in self.tasks.values():
            check_type_name(task.name, "cluster_requirement")
            if task.role not in ROLES:
                raise UsageError(f"{task.name}.role: {task.role!r} is not a role; allowed: {', '.join(ROLES)}")
            if not (task.command or self.command).strip():
                raise UsageError(f"task_command: no command for type {task.name!r}; "
                                 "allowed: a command for all types or one per type")
        if not any(t.role == "tracked" for t in self.tasks.values()):
            raise UsageError("tracked: no tracked type decides the outcome; allowed: mark at least one of "
                             f"{', '.join(self.tasks)} as tracked")
        if self.tensorboard and not self.output_path:
            raise UsageError("output: --tensorboard needs an output path (-o) for TensorBoard to read")
        if self.max_attempts < 1:
            raise UsageError(f"max_attempts: {self.max_attempts} is too small; allowed: a whole number >= 1")
        for name in ("allocation", "registration", "heartbeat", "application"):
            if getattr(self.timeouts, name) < 0:
                raise UsageError(f"timeout ({name}): must be >= 0 seconds (0 = no limit)")
        if not self.name.strip():
            raise UsageError("name: is empty; allowed: a non-empty application name")
        self._check_spread()
        if self.docker_image:
            check_image_reference(self.docker_image)
        for task in self.tasks.values():
            if task.docker_image:
                check_image_reference(task.docker_image, f"docker_image ({task.name})")
        check_docker_choice(self.docker_runtime, "docker_runtime", DOCKER_RUNTIMES)
        check_docker_choice(self.docker_engine, "docker_engine", DOCKER_ENGINES)
        for mount in self.docker_mounts:
            parse_mount(mount)
        check_docker_user(self.docker_user)
        if self.client_mode and CLIENT_TYPE in self.tasks and self.image_of(CLIENT_TYPE):
            raise UsageError("docker_image: --client runs the chief in the submitting process, not in an image; "
                             "allowed: an image per type for the others (TYPE:IMAGE), or no --client")
        if not self.queue.strip():
            raise UsageError("queue: is empty; allowed: a YARN queue name such as 'default'")
        for key in self.env:
            if not ENV_NAME.fullmatch(key):
                raise UsageError(f"env: {key!r} is not a variable name; allowed: letters, digits and '_'")
        if not self.python.strip():
            raise UsageError("python: is empty; allowed: the Python command on the nodes, such as python3")
        if self.framework not in FRAMEWORKS:
            raise UsageError(f"framework: {self.framework!r} is not supported; allowed: {', '.join(FRAMEWORKS)}")
        self._check_framework_shape()
        if self.heartbeat_interval < MIN_HEARTBEAT_INTERVAL_S:
            raise UsageError(f"heartbeat_interval: {self.heartbeat_interval:g} s is too short; allowed: at least "
                             f"{MIN_HEARTBEAT_INTERVAL_S} s")
        if self.timeouts.heartbeat and self.heartbeat_interval >= self.timeouts.heartbeat:
            raise UsageError(f"heartbeat_interval: {self.heartbeat_interval:g} s must be below the heartbeat timeout "
                             f"({self.timeouts.heartbeat:g} s)")
        check_data_path(self.input_path, "input")
        check_data_path(self.output_path, "output")
        if check_paths:
            if self.script and not Path(self.script).is_file():
                raise UsageError(f"script: {self.script} does not exist or is not a file")
            if self.src_dir:
                check_src_dir(self.src_dir)
            if self.python_venv and not self.python_venv.startswith("hdfs:"):
                check_packed_env(self.python_venv)
        if self.python_venv and not self.python_venv.endswith((".tar.gz", ".tgz", ".zip")):
            raise UsageError(f"python_venv: {self.python_venv} is not an archive; allowed: a .tar.gz, .tgz "
                             "or .zip made by venv-pack")
        if max_allocation is not None:
            self.check_fits(*max_allocation)
        return self

    def check_fits(self, max_memory_mb: int, max_vcores: int) -> None:
        """Every container within the largest one YARN grants (per distinct size, not per instance)."""
        for task in self.tasks.values():
            sizes = {index: (task.memory_of(index), task.vcores_of(index))
                     for index in sorted(set(task.memory_by_index) | set(task.vcores_by_index))}
            first_default = next((i for i in range(min(task.instances, len(sizes) + 1)) if i not in sizes), None)
            if first_default is not None:
                sizes[first_default] = (task.memory_mb, task.vcores)
            for index, (mem, vc) in sorted(sizes.items()):
                if mem > max_memory_mb:
                    raise UsageError(f"task_memory: {task.name}[{index}] asks {mem} MiB; the cluster's maximum "
                                     f"allocation is {max_memory_mb} MiB")
                if vc > max_vcores:
                    raise UsageError(f"task_vcores: {task.name}[{index}] asks {vc} vcores; the cluster's maximum "
                                     f"allocation is {max_vcores} vcores")
        if self.am_memory_mb > max_memory_mb:
            raise UsageError(f"am_memory: {self.am_memory_mb} MiB is above the maximum allocation {max_memory_mb} MiB")
        if self.am_vcores > max_vcores:
            raise UsageError(f"am_vcores: {self.am_vcores} vcores is above the maximum allocation {max_vcores}")

    def demand(self) -> dict[str, tuple[int, int]]:
        """(MiB, vcores) the whole gang holds at once, per node label ('' = the default partition)."""
        local = set(self.local_types())
        totals: dict[str, tuple[int, int]] = {"": (self.am_memory_mb, self.am_vcores)}
        for task in self.tasks.values():
            if task.name in local:
                continue
            mem = task.memory_mb * task.instances + sum(m - task.memory_mb for m in task.memory_by_index.values())
            vc = task.vcores * task.instances + sum(v - task.vcores for v in task.vcores_by_index.values())
            have = totals.get(task.node_label, (0, 0))
            totals[task.node_label] = (have[0] + mem, have[1] + vc)
        return totals

    def check_capacity(self, partitions: Mapping[str, tuple[int, int]]) -> None:
        """A gang must fit the cluster all at once: refuse a job larger than its partition's nodes together."""
        for label, (mem, vc) in self.demand().items():
            have_mem, have_vc = partitions.get(label, (0, 0))
            where = f"node_label {label!r}" if label else "the default partition"
            if mem > have_mem or vc > have_vc:
                raise UsageError(f"cluster_requirement: the job asks {mem / 1024:.1f} GiB and {vc} vcores at once in "
                                 f"{where}; the cluster has {have_mem / 1024:.1f} GiB and {have_vc} vcores there")


def default_job_name(framework: str, type_commands: Mapping[str, str] | None = None, command: Any = None) -> str:
    """What YARN and the history call a job given no name: its framework (`tensorflow`, `pytorch`), or for a
    `generic` job the program its command runs (`python3 train.py` -> `python3`, `/opt/run.sh x` -> `run.sh`).
    The seed's fixed `TensorFlow` named every PyTorch job TensorFlow."""
    if framework != "generic":
        return framework
    text = str(command or next(iter((type_commands or {}).values()), "")).strip()
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    first = next((w for w in words if not ENV_ASSIGNMENT.match(w) and w not in ("exec", "env")), "")
    return first.rstrip("/").rsplit("/", 1)[-1] or "generic"


ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")  # `FOO=1 python3 x.py`: the program is python3


def default_role(type_name: str) -> str:
    if type_name in DEFAULT_UNTRACKED:
        return "untracked"
    if type_name in DEFAULT_SIDECARS:
        return "sidecar"
    return "tracked"


JOB_FILE_KEYS = {
    "cluster_requirement", "tasks", "command", "task_memory", "task_vcores", "task_gpus", "node_label",
    "name", "queue", "tags", "env", "input", "output", "script", "src_dir", "tensorboard",
    "docker_image", "docker_runtime", "docker_engine", "docker_mounts", "docker_user", "python_venv",
    "client", "max_attempts", "max_free_retries", "timeouts", "tracked", "untracked",
    "am_attempts", "am_attempts_validity", "sidecar", "framework", "python", "am_memory", "am_vcores",
    "heartbeat_interval", "stop_grace", "history_dir", "spread", "am_node_label", "nproc_per_node",
    "elastic", "spares",
}
# Who submits, not what runs: read by the front end (a KerberosLogin), never in the job's spec (the keytab
# reaches the AM alone, as a private file: core/am/token_renewal.py).
CREDENTIAL_KEYS = {"principal", "keytab"}
TASK_KEYS = {"instances", "memory", "vcores", "gpus", "node_label", "command", "role", "docker_image",
             "nproc_per_node"}
TIMEOUT_KEYS = {f.name for f in fields(Timeouts)}


class _JobFileLoader(yaml.SafeLoader):
    """YAML without aliases: a job file has no use for them, and an alias bomb expands
    into gigabytes once the values are read (billion laughs)."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise UsageError(f"conf: YAML aliases (*name) are not allowed in a job file (line {mark.line + 1})")
        return super().compose_node(parent, index)


def load_job_file(path: str) -> dict[str, Any]:
    """A YAML or JSON job file: the same fields as the command line."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"conf: {path} does not exist or is not a file")
    size = p.stat().st_size
    if size > MAX_JOB_FILE_BYTES:
        raise UsageError(f"conf: {path} is {size_text(size)}; allowed: a job file of at most 1 MiB")
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"conf: {path} is not UTF-8 text (byte {exc.start}); allowed: a UTF-8 YAML or JSON file") from None
    try:
        data = yaml.load(text, Loader=_JobFileLoader)  # noqa: S506 - a SafeLoader without aliases
    except RecursionError:
        raise UsageError(f"conf: {path} is nested too deeply; allowed: a mapping of job fields") from None
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        where = f" (line {line + 1})" if line is not None else ""
        raise UsageError(f"conf: {path} is not valid YAML or JSON{where}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"conf: {path} must hold a mapping of job fields, not {type(data).__name__}")
    allowed = JOB_FILE_KEYS | CREDENTIAL_KEYS
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise unknown_name("conf", "field", unknown[0], allowed)
    return data


def _as_list(value: Any, field_name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    raise UsageError(f"{field_name}: expected a list or a comma-separated string, not {type(value).__name__}")


def _or_zero(value: Any) -> Any:
    """An absent or empty count (a front end's unset field) is 0."""
    return 0 if value is None or (isinstance(value, str) and not value.strip()) else value


def _elastic_option(value: Any) -> tuple[int, int]:
    """`MIN:MAX` workers (torchrun's --nnodes form) -> (MIN, MAX); absent or empty: (0, 0), not elastic."""
    if value is None or str(value).strip() == "":
        return 0, 0
    text = str(value).strip()
    low, sep, high = text.partition(":")
    if not sep:
        raise UsageError(f"elastic: {text!r} is malformed; allowed: MIN:MAX workers, such as 2:4")
    return (parse_count(low, "elastic (MIN)", minimum=0),
            parse_count(high, "elastic (MAX)", maximum=MAX_INSTANCES))


def _parse_nproc(value: Any, field_name: str) -> int:
    return parse_count(value, field_name, maximum=MAX_NPROC_PER_NODE)


def _mounts_option(value: Any) -> list[str]:
    return [parse_mount(m) for m in _as_list(value, "docker_mounts")]


def build_job_spec(options: Mapping[str, Any], check_paths: bool = True,
                   type_commands: Mapping[str, str] | None = None) -> JobSpec:
    """Build and validate (without the cluster) a JobSpec from front-end options.

    `options` holds the job-file keys above; every front end (CLI, Airflow,
    Azkaban, Oozie) maps its own input onto them and calls this. `check_paths`
    is off only where the paths name files on another machine (a generated
    Oozie action runs on a launcher node). `type_commands` (`--command TYPE=CMD`)
    replace the common command for their types before the spec is validated.
    """
    opts = {k: v for k, v in options.items() if v is not None}
    unknown = sorted(set(opts) - JOB_FILE_KEYS)
    if unknown:
        raise unknown_name(unknown[0], "option", unknown[0], JOB_FILE_KEYS)

    # Task types and counts: either a requirement string or a `tasks` mapping.
    per_type: dict[str, dict[str, Any]] = {}
    if "tasks" in opts:
        if not isinstance(opts["tasks"], Mapping):
            raise UsageError("tasks: expected a mapping of type -> {instances, memory, ...}")
        for name, body in opts["tasks"].items():
            check_type_name(str(name), "tasks")
            body = {"instances": body} if isinstance(body, int) else dict(body or {})
            bad = sorted(set(body) - TASK_KEYS)
            if bad:
                raise unknown_name(f"tasks.{name}", "field", bad[0], TASK_KEYS)
            body["instances"] = parse_count(body.get("instances", 1), f"tasks.{name}.instances",
                                            maximum=MAX_INSTANCES)
            per_type[str(name)] = body
    if "cluster_requirement" in opts:
        if per_type:
            raise UsageError("cluster_requirement: give either cluster_requirement or tasks, not both")
        per_type = {n: {"instances": c} for n, c in parse_requirement(str(opts["cluster_requirement"])).items()}
    if not per_type:
        raise UsageError("cluster_requirement: missing; allowed: '<type>:<count>,...' such as 'ps:1,worker:2'")
    if opts.get("client"):
        if CLIENT_TYPE not in per_type:
            per_type = {CLIENT_TYPE: {"instances": 1}, **per_type}
        elif per_type[CLIENT_TYPE]["instances"] != 1:
            raise UsageError(f"client: --client runs one {CLIENT_TYPE} in the submitting process; "
                             f"the requirement asks {per_type[CLIENT_TYPE]['instances']}")
    if opts.get("tensorboard") and "tensorboard" not in per_type:
        per_type["tensorboard"] = {"instances": 1, "role": "sidecar", "memory": 1024,
                                   "command": TENSORBOARD_COMMAND}
    instances = {n: b["instances"] for n, b in per_type.items()}
    image, type_images = parse_docker_images(opts.get("docker_image"), list(per_type))
    for name, body in per_type.items():
        if body.get("docker_image") is not None and name not in type_images:
            check_image_reference(str(body["docker_image"]), f"tasks.{name}.docker_image")
            type_images[name] = str(body["docker_image"])

    memory = ResourceForms.parse(opts.get("task_memory"), "task_memory", parse_memory_mb)
    vcores = ResourceForms.parse(opts.get("task_vcores"), "task_vcores", parse_count)
    gpus = ResourceForms.parse(opts.get("task_gpus"), "task_gpus", lambda v, f: parse_count(v, f, minimum=0))
    labels = ResourceForms.parse(opts.get("node_label"), "node_label", lambda v, f: v.strip())
    nprocs = ResourceForms.parse(opts.get("nproc_per_node"), "nproc_per_node", _parse_nproc)
    for forms, name in ((memory, "task_memory"), (vcores, "task_vcores"), (gpus, "task_gpus"), (labels, "node_label"),
                        (nprocs, "nproc_per_node")):
        forms.check_against(instances, name)
    for forms, name in ((gpus, "task_gpus"), (labels, "node_label"), (nprocs, "nproc_per_node")):
        if forms.per_task:
            (t, i), _ = next(iter(forms.per_task.items()))
            raise UsageError(f"{name}: {t}[{i}] — the per-task form is only for task_memory and task_vcores; "
                             f"allowed: '<value>' or '<type>:<value>'")

    roles = {n: b.get("role") or default_role(n) for n, b in per_type.items()}
    assigned: dict[str, str] = {}
    for role in ROLES:
        for name in _as_list(opts.get(role), role):
            if name not in per_type:
                raise UsageError(f"{role}: names unknown type {name!r}; allowed: {', '.join(per_type)}")
            if name in assigned and assigned[name] != role:
                raise UsageError(f"{role}: type {name!r} is already {assigned[name]}; a type has one role")
            assigned[name] = role
            roles[name] = role

    for name in type_commands or {}:
        if name not in per_type:
            raise UsageError(f"--command: names unknown type {name!r}; allowed: {', '.join(per_type)}")

    tasks: dict[str, TaskSpec] = {}
    for name, body in per_type.items():
        n = body["instances"]
        own = {
            "memory": parse_memory_mb(body["memory"], f"tasks.{name}.memory") if "memory" in body else None,
            "vcores": parse_count(body["vcores"], f"tasks.{name}.vcores") if "vcores" in body else None,
            "gpus": parse_count(body["gpus"], f"tasks.{name}.gpus", 0) if "gpus" in body else None,
            "node_label": str(body["node_label"]).strip() if body.get("node_label") is not None else None,
            "nproc": _parse_nproc(body["nproc_per_node"], f"tasks.{name}.nproc_per_node")
            if "nproc_per_node" in body else None,
        }
        tasks[name] = TaskSpec(
            name=name, instances=n,
            memory_mb=memory.for_type(name, own["memory"], DEFAULT_MEMORY_MB),
            vcores=vcores.for_type(name, own["vcores"], 1),
            gpus=gpus.for_type(name, own["gpus"], 0),
            node_label=labels.for_type(name, own["node_label"], ""),
            command=str((type_commands or {}).get(name) or body.get("command") or ""),
            role=roles[name],
            docker_image=type_images.get(name, ""),
            nproc_per_node=nprocs.for_type(name, own["nproc"], 1),
            memory_by_index={i: m for (t, i), m in memory.per_task.items() if t == name},
            vcores_by_index={i: v for (t, i), v in vcores.per_task.items() if t == name},
        )

    env = opts.get("env") or {}
    if isinstance(env, (list, tuple)):
        env = parse_env_pairs(env)
    if not isinstance(env, Mapping):
        raise UsageError("env: expected KEY=VALUE pairs or a mapping")
    timeouts = Timeouts()
    raw_timeouts = opts.get("timeouts") or {}
    if not isinstance(raw_timeouts, Mapping):
        raise UsageError(f"timeouts: expected a mapping with keys {', '.join(sorted(TIMEOUT_KEYS))}")
    for key, value in raw_timeouts.items():
        if key not in TIMEOUT_KEYS:
            raise unknown_name("timeouts", "key", str(key), TIMEOUT_KEYS)
        setattr(timeouts, key, parse_seconds(value, f"timeout ({key})"))

    elastic = _elastic_option(opts.get("elastic"))
    spec = JobSpec(
        tasks=tasks,
        command=str(opts.get("command") or ""),
        name=str(opts["name"]) if "name" in opts else default_job_name(str(opts.get("framework", "tensorflow")),
                                                                        type_commands, opts.get("command")),
        queue=str(opts.get("queue", "default")),
        tags=_as_list(opts.get("tags"), "tags"),
        env={str(k): str(v) for k, v in env.items()},
        input_path=str(opts.get("input") or ""),
        output_path=str(opts.get("output") or ""),
        script=str(opts.get("script") or ""),
        src_dir=str(opts.get("src_dir") or ""),
        tensorboard=bool(opts.get("tensorboard", False)),
        docker_image=image,
        docker_runtime=str(opts.get("docker_runtime", "engine")).strip().lower(),
        docker_engine=str(opts.get("docker_engine", "docker")).strip().lower(),
        docker_mounts=_mounts_option(opts.get("docker_mounts")),
        docker_user=str(opts.get("docker_user") or "").strip(),
        python_venv=str(opts.get("python_venv") or ""),
        client_mode=bool(opts.get("client", False)),
        max_attempts=parse_count(opts.get("max_attempts", 1), "max_attempts"),
        max_free_retries=parse_count(opts.get("max_free_retries", DEFAULT_FREE_RETRIES), "max_free_retries",
                                     minimum=0, maximum=MAX_FREE_RETRIES),
        am_attempts=parse_count(opts.get("am_attempts", DEFAULT_AM_ATTEMPTS), "am_attempts"),
        am_attempts_validity_s=parse_seconds(opts.get("am_attempts_validity", DEFAULT_AM_ATTEMPTS_VALIDITY_S),
                                             "am_attempts_validity"),
        timeouts=timeouts,
        framework=str(opts.get("framework", "tensorflow")),
        python=str(opts.get("python", "python3")),
        am_memory_mb=parse_memory_mb(opts.get("am_memory", 512), "am_memory"),
        am_vcores=parse_count(opts.get("am_vcores", 1), "am_vcores"),
        heartbeat_interval=parse_seconds(opts.get("heartbeat_interval", 1.0), "heartbeat_interval", positive=True),
        stop_grace=parse_seconds(opts.get("stop_grace", 10.0), "stop_grace"),
        history_dir=check_history_dir(str(opts.get("history_dir") or "").strip(), "history_dir"),
        spread=list(dict.fromkeys(_as_list(opts.get("spread"), "spread"))),
        am_node_label=str(opts.get("am_node_label") or "").strip(),
        elastic_min=elastic[0],
        elastic_max=elastic[1],
        spares=parse_count(_or_zero(opts.get("spares")), "spares", minimum=0, maximum=MAX_SPARES),
    )
    return spec.validate(check_paths=check_paths)


