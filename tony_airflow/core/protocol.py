"""The registry protocol between executors and the AM: paths and HMAC signing,
and the keys through which the AM tells the client and attempt 1's executors
where it is and how far it got (skein's key-value store).

Every request carries a timestamp, a nonce and an HMAC-SHA256 over method,
path, timestamp, nonce and the body's digest, keyed by the per-application
secret. The AM refuses unsigned, forged, stale and replayed requests.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import json
import math
import secrets
import time
from dataclasses import MISSING, asdict, dataclass, fields, replace
from enum import Enum
from typing import Any, TypeVar

try:
    from enum import StrEnum
except ImportError:  # Python < 3.11: an elastic job's image imports this module (torchrun's `tony` rendezvous)
    class StrEnum(str, Enum):  # type: ignore[no-redef]  # noqa: UP042 (the values are what count there)
        pass

REGISTER = "/v1/register"
CLUSTER_SPEC = "/v1/cluster-spec"
HEARTBEAT = "/v1/heartbeat"
FINISHED = "/v1/finished"
OUTPUT = "/v1/output"        # an executor ships its command's new output (core/output.py)
TRAINING = "/v1/training"    # an executor relays its program's newest progress report (core/am/training.py)
TRAINING_JSON = "/training.json"  # {"training": the AM's training dict or null, "series": {metric: [[step, value]]}}
APP_TAG = "tony-airflow"  # every application of this project carries it (the triggers' shared poll asks by it)
STATUS_JSON = "/status.json"
PROGRESS_JSON = "/progress.json"  # {"progress": Progress, "address": the registry's host:port, "training": …}
AM_PAGES = "/pages/tony"  # where skein's web UI (the tracking URL) passes requests on to the AM's server

H_TIMESTAMP = "X-Tony-Timestamp"
H_NONCE = "X-Tony-Nonce"
H_SIGNATURE = "X-Tony-Signature"

MAX_SKEW_S = 300.0
# Nonces the AM remembers at most (~200 B each: 20 MB). Past that, the oldest are forgotten and requests
# dated no later than the newest forgotten one are refused: at 1000 tasks sending two requests a second,
# that refuses only requests more than 50 s old (hosts' clocks are kept by NTP; a request takes milliseconds).
MAX_NONCES = 100_000
SECRET_FILE = ".tony-secret"
JOB_FILE = ".tony-job.json"

# skein's key-value store. A light module on purpose: the client and the executor's
# start-up read these without importing the AM (aiohttp, jinja2: 0.2 s per process).
AM_ADDRESS_KEY = "tony.am_address"  # where an AM attempt's first executors find the registry
INITIAL_ATTEMPT_KEY = "tony.initial_attempt"  # and which training attempt they run (put before the address)
TENSORBOARD_URL_KEY = "tony.tensorboard_url"
SUBMITTED_AT_ENV = "TONY_SUBMITTED_AT"  # the AM's environment: when the client built the submission

# An executor's launch environment: which task it runs and where the AM is (a retry's
# container is told by the AM; attempt 1's finds out, core/executor/boot.py).
ENV_TASK_TYPE = "TONY_TASK_TYPE"
ENV_TASK_INDEX = "TONY_TASK_INDEX"
ENV_ATTEMPT = "TONY_ATTEMPT"
ENV_AM_ADDRESS = "TONY_AM_ADDRESS"
ENV_APPLICATION_ID = "TONY_APPLICATION_ID"
ENV_PYTHON = "TONY_PYTHON"            # the Python that runs the task command (a packed env's, if shipped)
ENV_CLIENT_HOST = "TONY_CLIENT_HOST"  # client mode: the address the local chief advertises

# A task container's working directory: what is shipped or staged where.
VENV_DIR = "venv"           # a packed Python environment, unpacked
SRC_DIR = "src"             # the job's src_dir, unpacked; the command runs inside it
INPUT_DIR = "tony-input"    # an hdfs:// input, copied in
OUTPUT_DIR = "tony-output"  # an hdfs:// output, mirrored


SPARE = "/v1/spare"  # an elastic job's spare waits for a lost worker's place (core/am/spares.py)
ENV_SPARE = "TONY_SPARE"  # a spare's launch environment: its id ("spare-N"); absent for a task's container
SPARE_PLACE_ENV = "TONY_SPARE_PLACE_FILE"  # a spare's early torchrun: where its place's environment will be
RENDEZVOUS = "/v1/rendezvous"  # an elastic job's torchrun agents (core/am/rendezvous.py)
RENDEZVOUS_BACKEND = "tony"    # torchrun's --rdzv-backend name of the AM-kept rendezvous
ELASTIC_RENDEZVOUS_ENV = "TONY_ELASTIC_RENDEZVOUS"  # a job's env: "tony" (the default) or "c10d" (the old way)
RENDEZVOUS_SECRET_ENV = "TONY_RDZV_SECRET_FILE"  # torchrun's handler signs its requests with the job's secret


def elastic_rendezvous(job_env: dict[str, str]) -> str:
    """Which rendezvous an elastic job's torchrun agents use: the AM's (`tony`, issue 51: no container's
    loss ends it) unless the job's environment asks for torchrun's c10d in the rank-0 container."""
    return "c10d" if job_env.get(ELASTIC_RENDEZVOUS_ENV, "").strip().lower() == "c10d" else RENDEZVOUS_BACKEND


def launch_env(type_: str, index: int, attempt: int, am_address: str, app_id: str) -> dict[str, str]:
    """The variables that tell an executor its task and the registry's address."""
    return {ENV_TASK_TYPE: type_, ENV_TASK_INDEX: str(index), ENV_ATTEMPT: str(attempt),
            ENV_AM_ADDRESS: am_address, ENV_APPLICATION_ID: app_id}


class TaskStatus(StrEnum):
    """A task's state in the AM and in the history, in the order a task passes through them."""

    REQUESTED = "REQUESTED"
    ALLOCATED = "ALLOCATED"
    REGISTERED = "REGISTERED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"
    LOST = "LOST"  # the history only: the AM ended before the task reported


def new_secret() -> str:
    return secrets.token_hex(32)


def _message(method: str, path: str, timestamp: str, nonce: str, body: bytes) -> bytes:
    digest = hashlib.sha256(body).hexdigest()
    return "\n".join((method.upper(), path, timestamp, nonce, digest)).encode()


def sign(secret: str, method: str, path: str, body: bytes = b"") -> dict[str, str]:
    """The headers that authenticate one request."""
    timestamp = f"{time.time():.3f}"
    nonce = secrets.token_hex(12)
    mac = hmac.new(secret.encode(), _message(method, path, timestamp, nonce, body), hashlib.sha256)
    return {H_TIMESTAMP: timestamp, H_NONCE: nonce, H_SIGNATURE: mac.hexdigest()}


def _sealing_key(secret: str) -> bytes:
    import base64

    return base64.urlsafe_b64encode(hashlib.sha256(b"tony-seal\n" + secret.encode()).digest())


def seal(secret: str, text: str) -> str:
    """`text` encrypted and authenticated with a key from the job's secret (Fernet): a credential the AM
    hands its executors over plain HTTP (a renewed HDFS token) is readable only by the job's processes."""
    from cryptography.fernet import Fernet

    return Fernet(_sealing_key(secret)).encrypt(text.encode()).decode()


def unseal(secret: str, sealed: str) -> str:
    """What `seal` sealed; ValueError when it was not sealed with this secret or was altered."""
    from cryptography.fernet import Fernet, InvalidToken

    try:
        return Fernet(_sealing_key(secret)).decrypt(sealed.encode()).decode()
    except InvalidToken:
        raise ValueError("not sealed with this job's secret") from None


class Verifier:
    """Checks signatures and remembers recent nonces so a request cannot be replayed."""

    def __init__(self, secret: str, max_skew: float = MAX_SKEW_S, max_nonces: int = MAX_NONCES):
        self._key = secret.encode()
        self._max_skew = max_skew
        self._max_nonces = max_nonces
        # A nonce is kept until its own timestamp goes stale (timestamp + skew), not for a time after
        # receipt: a request dated ahead of the AM's clock stays acceptable that much longer.
        self._seen: set[str] = set()
        self._expiry: list[tuple[float, str]] = []  # a heap of (when the nonce's request goes stale, nonce)
        self._floor = -math.inf  # requests dated at or before it are refused: their nonces may be forgotten

    def check(self, method: str, path: str, headers, body: bytes) -> str | None:
        """None when the request is authentic, else the reason it is refused."""
        timestamp, nonce, signature = (headers.get(h) for h in (H_TIMESTAMP, H_NONCE, H_SIGNATURE))
        if not (timestamp and nonce and signature):
            return "unsigned request"
        try:
            sent = float(timestamp)
        except ValueError:
            return "malformed timestamp"
        if not abs(time.time() - sent) <= self._max_skew:  # also NaN
            return "stale request"
        if sent <= self._floor:
            return "stale request (older than the nonces this AM still holds)"
        expected = hmac.new(self._key, _message(method, path, timestamp, nonce, body), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, signature):
            return "bad signature"
        now = time.time()
        while self._expiry and self._expiry[0][0] < now:
            self._seen.discard(heapq.heappop(self._expiry)[1])
        if nonce in self._seen:
            return "replayed request"
        self._seen.add(nonce)
        heapq.heappush(self._expiry, (sent + self._max_skew, nonce))
        while len(self._expiry) > self._max_nonces:  # bounded by count too, never by forgetting silently
            stale_at, forgotten = heapq.heappop(self._expiry)
            self._seen.discard(forgotten)
            self._floor = max(self._floor, stale_at - self._max_skew)
        return None


# ------------------------------------------------------------------ messages
class BadMessage(ValueError):
    """A signed body that is not the message its path expects (answered with HTTP 400)."""


M = TypeVar("M")


@dataclass(frozen=True)
class Register:
    type: str
    index: int
    attempt: int
    host: str
    port: int
    container_id: str = ""


@dataclass(frozen=True)
class SpareWaits:
    """A spare's executor, waiting for a place (POST /v1/spare?wait=S)."""

    spare: str
    attempt: int
    host: str
    container_id: str = ""


@dataclass(frozen=True)
class Heartbeat:
    type: str
    index: int
    attempt: int
    usage: dict[str, Any] | None = None
    container_id: str = ""  # YARN's: a container the gang released is told to stop (core/am/gang.py)
    wait: float = 0.0  # seconds the AM may hold a 'run' answer: a 'stop' is answered the moment it is decided
    # elastic: this container took the output's writer role (claimed, pulled, adopted) in the handover of this
    # round, the tag of the AM's 'take' (core/am/rendezvous.py); 0: no such word (ordinary heartbeats)
    took_writer: int = 0


@dataclass(frozen=True)
class Finished:
    type: str
    index: int
    attempt: int
    exit_code: int
    stderr_tail: str = ""
    usage: dict[str, Any] | None = None
    container_id: str = ""
    memory_killed: bool = False  # its container engine killed it for its memory limit (YARN says its own)


@dataclass(frozen=True)
class Output:
    """A piece of a task's output: `text` continues the attempt's output at character `offset`."""

    type: str
    index: int
    attempt: int
    offset: int
    text: str
    container_id: str = ""


@dataclass(frozen=True)
class Training:
    """The newest progress report of a task's program (tony_airflow/progress.py's rules; None: none since the
    last message), and what the task's status endpoint refused since then, by kind."""

    type: str
    index: int
    attempt: int
    report: dict[str, Any] | None = None
    refused: dict[str, Any] | None = None
    source: str = "report"  # "report" (the program's) or "tensorboard" (its event files' scalars)
    container_id: str = ""


# field annotations (strings under `from __future__ import annotations`) -> the JSON types allowed
_KINDS: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,),
                                       "dict[str, Any] | None": (dict, type(None))}


def parse_message(kind: type[M], body: bytes) -> M:
    """Decode and check one executor message; BadMessage names what is wrong.

    Unknown fields are ignored (a newer executor may send more); missing or
    mistyped known fields are refused.
    """
    try:
        data = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError):
        raise BadMessage("the body is not JSON") from None
    if not isinstance(data, dict):
        raise BadMessage(f"the body must be a JSON object, not {type(data).__name__}")
    values: dict[str, Any] = {}
    for f in fields(kind):  # type: ignore[arg-type]
        if f.name not in data:
            if f.default is MISSING:
                raise BadMessage(f"field {f.name!r} is missing")
            continue
        value = data[f.name]
        allowed = _KINDS.get(str(f.type), (object,))
        if (isinstance(value, bool) and f.type != "bool") or not isinstance(value, allowed):  # JSON true is no int
            if f.type == "int" and isinstance(value, str) and value.lstrip("-").isdigit():
                value = int(value)
            else:
                raise BadMessage(f"field {f.name!r} has the wrong type ({type(value).__name__})")
        values[f.name] = value
    return kind(**values)


@dataclass(frozen=True)
class Progress:
    """How far the AM got, as it serves it to clients (PROGRESS_JSON, through the tracking URL)."""

    attempt: int = 0
    max_attempts: int = 1
    total: int = 0
    allocated: int = 0
    registered: int = 0
    running: int = 0
    finished: int = 0
    spec_published: bool = False
    waiting: str = ""  # while containers are missing: which, and what YARN says is in the way (core/am/gang.py)
    ending: bool = False  # the attempt's outcome is decided: its other tasks are stopped, then the AM ends or retries
    notice: str = ""  # the attempt's latest word beside the counts: an elastic job's lost and replaced worker
    training: dict[str, Any] | None = None  # the page's `training` (how far the program is; core/am/training.py)

    @classmethod
    def from_dict(cls, data: object) -> Progress | None:
        """The AM's progress record; fields a newer AM adds are ignored, a broken record is None."""
        if not isinstance(data, dict):
            return None
        known = {f.name for f in fields(cls)}
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except TypeError:
            return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def progress_page(answer: object) -> tuple[Progress | None, str | None]:
    """The AM's PROGRESS_JSON answer: its progress record and the registry's host:port (None where missing)."""
    if not isinstance(answer, dict):
        return None, None
    progress = Progress.from_dict(answer.get("progress"))
    training = training_of(answer)
    if progress is not None and training is not None:
        progress = replace(progress, training=training)
    return progress, answer.get("address") or None


def training_of(answer: object) -> dict[str, Any] | None:
    """The `training` dict of the AM's PROGRESS_JSON answer (core/am/training.py), None where missing."""
    training = answer.get("training") if isinstance(answer, dict) else None
    return training if isinstance(training, dict) else None


def is_proxied(tracking_url: str) -> bool:
    """Before the AM registered, the tracking URL is the RM's own page: the AM serves nothing yet."""
    return "/proxy/" in (tracking_url or "")


def progress_url(tracking_url: str) -> str | None:
    """Where the AM serves PROGRESS_JSON through the tracking URL; None before the AM registered."""
    return am_page_url(tracking_url, PROGRESS_JSON) if is_proxied(tracking_url) else None


def am_page_url(tracking_url: str, path: str) -> str:
    """A read-only page of the AM's server as the tracking URL (the RM's proxy, skein's web UI) serves it."""
    return f"{tracking_url.rstrip('/')}{AM_PAGES}{path}"


@dataclass(frozen=True)
class ClusterSpecAnswer:
    """The AM's answer to a cluster-spec long poll."""

    state: str                              # "ready", "wait" (ask again) or "stop" (the attempt is over)
    spec: dict[str, Any] | None = None      # with "ready": {"app_id", "attempt", "hosts": {type: [host:port]}}
