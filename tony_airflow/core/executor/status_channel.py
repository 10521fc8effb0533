"""Where a task's program reports how far it is (issue #52): a loopback HTTP endpoint per task, and the
relay of its newest report to the AM over the signed registry channel.

Why a loopback endpoint in the executor rather than the AM's address: the program needs no secret of the
job (its token opens this one endpoint of this one task, nothing else), a report never crosses the network
unsigned, and a flood from a broken program stops here, counted, never reaching the AM. A task in an image
reaches it too: the engine runs it with the host's network (core/executor/engine.py).

The program gets TONY_STATUS_URL, TONY_STATUS_TOKEN and the helper (tony_airflow/progress.py, copied as
`tony_progress.py` into a directory put first on its PYTHONPATH). The endpoint refuses a wrong token (401),
a body over MAX_BODY (413), a body that is not JSON (400) or not a report (400), and drops what comes faster
than its rate (429); each kind is counted and the counts reach the AM's status page (`training_refused`).
Only the newest report is kept; the relay sends it at most once every RELAY_S, and a send that fails is
dropped: a report never fails or holds up the task.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tony_airflow import progress
from tony_airflow.core.protocol import TRAINING

log = logging.getLogger("tony.executor.status")
PATH = "/report"
RATE_PER_S = 5.0        # reports taken per second, in the long run (the helper sends at most 2)
BURST = 10              # ... and at once
RELAY_S = 1.0           # the newest report goes to the AM at most this often
MAX_CONNECTIONS = 8     # served at once (one thread each); more are closed and counted as a flood
HELPER_NAME = "tony_progress.py"
HELPER_DIR = ".tony-progress"


class Bucket:
    """A token bucket: `take` is False (drop) once more than BURST came faster than RATE_PER_S."""

    def __init__(self, rate: float = RATE_PER_S, burst: int = BURST, clock: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens, self.at = float(burst), clock()
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            now = self.clock()
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
            self.at = now
            if self.tokens < 1:
                return False
            self.tokens -= 1
            return True


class StatusEndpoint:
    """The loopback endpoint of one task: the newest good report, and the refusals counted by kind."""

    def __init__(self, token: str | None = None, bucket: Bucket | None = None):
        self.token = token or secrets.token_hex(16)
        self.bucket = bucket or Bucket()
        self._lock = threading.Lock()
        self._latest: dict[str, Any] | None = None
        self.refused = {kind: 0 for kind in progress.REFUSAL_KINDS}
        self._relayed = dict(self.refused)
        self.taken = 0
        self._server: ThreadingHTTPServer | None = None

    # ------------------------------------------------------------------ the rules
    def judge(self, token: str | None, length: int | None, read: Callable[[int], bytes]) -> tuple[int, str]:
        """(HTTP status, reason) of one request; a good report is kept as the newest."""
        if not token or not hmac.compare_digest(token.encode(), self.token.encode()):
            return self._refuse("bad_token", 401, "wrong token")
        if length is None or length < 0:
            return self._refuse("bad_json", 411, "a report has a Content-Length")
        if length > progress.MAX_BODY:
            return self._refuse("too_large", 413, f"a report is at most {progress.MAX_BODY} bytes")
        if not self.bucket.take():
            return self._refuse("flood", 429, "too many reports: dropped")
        try:
            data = json.loads(read(length))
        except (ValueError, UnicodeDecodeError):
            return self._refuse("bad_json", 400, "a report is a JSON object")
        try:
            clean = progress.clean_report(data)
        except progress.BadReport as exc:
            return self._refuse("bad_report", 400, str(exc))
        with self._lock:
            self._latest = clean
            self.taken += 1
        return 204, ""

    def _refuse(self, kind: str, status: int, reason: str) -> tuple[int, str]:
        with self._lock:
            self.refused[kind] += 1
        return status, reason

    def take_news(self) -> tuple[dict[str, Any] | None, dict[str, int]]:
        """The newest report not relayed yet (None: none) and the refusals since the last call."""
        with self._lock:
            latest, self._latest = self._latest, None
            news = {k: n - self._relayed[k] for k, n in self.refused.items() if n > self._relayed[k]}
            self._relayed = dict(self.refused)
        return latest, news

    def give_back(self, latest: dict[str, Any] | None, news: dict[str, int]) -> None:
        """A relay that failed: its refusals are counted again next time (its report is dropped)."""
        with self._lock:
            for kind, n in news.items():
                self._relayed[kind] -= n

    # ------------------------------------------------------------------ serving
    def start(self) -> StatusEndpoint:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 5.0  # a client that sends half a request holds one thread this long at most

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length_header = self.headers.get("Content-Length")
                try:
                    length = int(length_header) if length_header is not None else None
                except ValueError:
                    length = None
                if self.path.split("?")[0] != PATH:
                    status, reason = 404, f"reports go to {PATH}"
                else:
                    try:
                        status, reason = endpoint.judge(self.headers.get(progress.TOKEN_HEADER), length,
                                                        self.rfile.read)
                    except OSError:  # half a body, then silence (the handler's timeout): not a report
                        status, reason = endpoint._refuse("bad_json", 400, "the body did not arrive whole")
                        self.close_connection = True
                body = json.dumps({"error": reason}).encode() if reason else b""
                self.send_response(status)
                if status >= 400 and status != 400:  # a body left unread: the connection ends
                    self.close_connection = True
                    self.send_header("Connection", "close")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if body:
                    self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # a flood must not fill the task's log
                pass

        server = BoundedServer(("127.0.0.1", 0), Handler, on_full=lambda: endpoint._refuse("flood", 503, ""))
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="status-endpoint",
                         daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}{PATH}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class BoundedServer(ThreadingHTTPServer):
    """At most MAX_CONNECTIONS served at once, each in a thread; a connection over that is closed at once
    and counted as a flood (a review: any local user could hold a thread per idle connection, without
    bound). `request_queue_size` is read by listen(), so it is set here, not after."""

    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], handler: Any, on_full: Callable[[], Any]) -> None:
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._on_full = on_full
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._on_full()
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def ship_helper(where: Path) -> Path:
    """The helper as `tony_progress.py` in `where`/HELPER_DIR (inside the container's working directory,
    which an image's container mounts at its own path); the directory to put on PYTHONPATH."""
    target = where / HELPER_DIR
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(progress.__file__, target / HELPER_NAME)
    return target


def program_env(endpoint: StatusEndpoint, helper_dir: Path, environ: dict[str, str]) -> dict[str, str]:
    """What the program sees: the endpoint, its token, and the helper first on its PYTHONPATH."""
    path = environ.get("PYTHONPATH", "")
    return {progress.ENV_URL: endpoint.url, progress.ENV_TOKEN: endpoint.token,
            "PYTHONPATH": f"{helper_dir}{os.pathsep}{path}" if path else str(helper_dir)}


class Relay:
    """The thread that takes the endpoint's news to the AM every RELAY_S (signed, `POST /v1/training`)."""

    def __init__(self, endpoint: StatusEndpoint, send: Callable[[str, dict[str, Any]], Any],
                 ident: dict[str, Any], source: Callable[[], dict[str, Any] | None] | None = None):
        self.endpoint, self.send, self.ident = endpoint, send, ident
        self.source = source  # the no-code source (TensorBoard's scalars) while the program reports nothing
        self._stop = threading.Event()
        self._warned = False
        self._thread = threading.Thread(target=self._run, name="status-relay", daemon=True)

    def start(self) -> Relay:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(RELAY_S):
            self.relay_once()

    def relay_once(self) -> None:
        latest, news = self.endpoint.take_news()
        kind = "report"
        if latest is None and self.endpoint.taken == 0 and self.source is not None:
            try:
                latest, kind = self.source(), "tensorboard"
            except Exception as exc:  # the no-code source is a nicety
                log.debug("tensorboard scalars: %s", exc)
        if latest is None and not news:
            return
        try:
            self.send(TRAINING, {**self.ident, "report": latest, "refused": news or None, "source": kind})
        except Exception as exc:  # dropped: a report never fails the task
            self.endpoint.give_back(latest, news)
            if not self._warned:
                self._warned = True
                log.warning("a progress report could not reach the AM (dropped; said once): %s", exc)

    def stop(self, final: bool = True) -> None:
        """The last news out (the program's final numbers), then no more. Not `final` (the AM is lost), or the
        relay still inside a send to an AM that does not answer: no last send, which would hold the task's
        end up to a call's timeout (a review)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=RELAY_S + 1)
        if final and not self._thread.is_alive():
            self.relay_once()
