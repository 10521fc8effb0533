"""The registry's HTTP+JSON server (aiohttp), and the read-only status page.

Signed endpoints take executors' messages; `/`, `/status.json`, `/progress.json`
(the counts clients show), `/output.json` (a task's live output by offset), `/events.jsonl` and the
TensorBoard pass-through are read-only and reached through the YARN tracking URL
(`<tracking>/pages/tony/...`), where the ResourceManager applies the application's view ACLs. Who
can read them (the job's stdout and stderr on `/output.json`, its events, its status and TensorBoard):
- through the tracking URL, whom the RM's view ACLs admit: the proxy reaches skein's web UI, which
  admits only the proxy's addresses (Hadoop's AmIpFilter, PROXY_HOSTS) and passes `pages/...` on here;
- directly, on the AM's own host, processes of the AM's own user (skein's web UI is one) and root:
  the peer socket's owner is read from the kernel's table (core/am/peer.py);
- nobody else: another host, or another user's container on the same NodeManager, gets 403.
"""

from __future__ import annotations

import asyncio
import collections
import gzip
import ipaddress
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TypeVar

from aiohttp import web

from tony_airflow.core import protocol
from tony_airflow.core.am import tensorboard_proxy
from tony_airflow.core.am.outputs import Outputs
from tony_airflow.core.am.peer import socket_owner
from tony_airflow.core.am.registry import Registry
from tony_airflow.core.am.rendezvous import Rendezvous, RendezvousError, unb64
from tony_airflow.core.history.events import EventLog
from tony_airflow.core.output import OUTPUT_PATH, SHIP_CHARS, task_key

log = logging.getLogger("tony.am.server")
LONG_POLL_S = 20.0
MAX_HEARTBEAT_WAIT_S = 5.0  # a held heartbeat (its `wait`) is answered within this, whatever it asked
RENDEZVOUS_POLL_S = 0.2  # how often a waiting rendezvous request looks again
REFUSED_SAMPLE = 20          # refusals kept for the status page
REFUSED_LOG_EVERY_S = 60.0   # at most one summary line per minute under a flood
M = TypeVar("M")


@dataclass
class RefusedRequests:
    """Unsigned, forged, stale or replayed requests: counted, a bounded sample kept, logged
    at most once a minute so that a flood cannot fill the AM's log or memory."""

    count: int = 0
    sample: collections.deque = field(default_factory=lambda: collections.deque(maxlen=REFUSED_SAMPLE))
    _unlogged: int = 0
    _logged_at: float = 0.0

    def add(self, method: str, path: str, remote: str | None, reason: str) -> None:
        self.count += 1
        self.sample.append({"time": time.time(), "method": method, "path": path, "remote": remote, "reason": reason})
        self._unlogged += 1
        now = time.monotonic()
        if self._logged_at == 0.0 or now - self._logged_at >= REFUSED_LOG_EVERY_S:
            log.warning("refused %d request(s) in the last %s, e.g. %s %s from %s: %s (%d in all)",
                        self._unlogged, "minute" if self._logged_at else "moment", method, path, remote, reason,
                        self.count)
            self._unlogged, self._logged_at = 0, now


REFUSED = web.AppKey("refused", RefusedRequests)
PAGES_THROUGH_PROXY = ("the AM's pages are read through the application's tracking URL, where the ResourceManager "
                       "applies the application's view ACLs; a direct request from another host or another user "
                       "is refused")


def from_this_host(request: web.Request) -> bool:
    """Whether the request came from the AM's own host: skein's web UI, which the RM's proxy reaches (and
    which passes `pages/...` on to this server), or a process beside it. A connection whose source
    address is its destination address was made on this host (the kernel picks it for local traffic).
    This is Hadoop's own rule for AM pages (AmIpFilter: only the proxy's addresses), one hop further."""
    peer = (request.remote or "").split("%")[0]
    try:
        if ipaddress.ip_address(peer).is_loopback:
            return True
    except ValueError:
        return False
    local = request.transport.get_extra_info("sockname") if request.transport is not None else None
    return local is not None and str(local[0]).split("%")[0] == peer


def of_this_user(request: web.Request) -> bool:
    """Whether the peer's socket belongs to this process's user or root (read from /proc/net/tcp{,6});
    where there is no such table to read, the host rule alone decides."""
    transport = request.transport
    peer = transport.get_extra_info("peername") if transport is not None else None
    local = transport.get_extra_info("sockname") if transport is not None else None
    if not peer or not local:
        return False
    try:
        owner = socket_owner((str(peer[0]), int(peer[1])), (str(local[0]), int(local[1])))
    except OSError:
        return True
    return owner is not None and owner in (os.getuid(), 0)


class CompressedTail:
    """The ready answer without its opening brace, gzip-compressed once per attempt's answer."""

    def __init__(self) -> None:
        self._source: bytes | None = None
        self._tail = b""

    def tail(self, answer: bytes) -> bytes:
        if answer is not self._source:
            self._source, self._tail = answer, gzip.compress(answer[1:], compresslevel=6, mtime=0)
        return self._tail


def build_app(registry: Registry, secret: str, page: Callable[[], str] | None = None,
              history: EventLog | None = None, address: Callable[[], str] | None = None) -> web.Application:
    """`page` renders the status page (the AM's live view of the job history); `address` is where
    this server listens (known once it has started), for a client-mode chief."""
    verifier = protocol.Verifier(secret)
    refused = RefusedRequests()
    ready_gzip = CompressedTail()
    outputs = Outputs(f"{t}:{i}" for t, i in registry.job.task_ids())

    @web.middleware
    async def authenticate(request: web.Request, handler):
        if request.path.startswith("/v1/"):
            body = await request.read()
            reason = verifier.check(request.method, request.path_qs, request.headers, body)
            if reason is not None:
                refused.add(request.method, request.path, request.remote, reason)
                return web.json_response({"error": reason}, status=401)
        elif not from_this_host(request):
            refused.add(request.method, request.path, request.remote, "a page asked for from another host")
            return web.json_response({"error": PAGES_THROUGH_PROXY}, status=403)
        elif not of_this_user(request):
            refused.add(request.method, request.path, request.remote, "a page asked for by another user")
            return web.json_response({"error": PAGES_THROUGH_PROXY}, status=403)
        return await handler(request)

    async def message(request: web.Request, kind: type[M]) -> M:
        try:
            return protocol.parse_message(kind, await request.read())
        except protocol.BadMessage as exc:
            raise web.HTTPBadRequest(text=json.dumps({"error": f"{request.path}: {exc}"}),
                                     content_type="application/json") from None

    async def register(request: web.Request) -> web.StreamResponse:
        """With `?wait=S`, the answer also holds the cluster spec once the gang formed within S seconds
        (a long poll): one request per executor to the gang's start instead of two."""
        try:
            wait = _wait_of(request, default=0.0)
        except ValueError:
            return web.json_response({"error": "wait must be a number of seconds"}, status=400)
        msg = await message(request, protocol.Register)
        reason = registry.register(msg.type, msg.index, msg.attempt, msg.host, msg.port, msg.container_id)
        if reason is not None:
            return web.json_response({"error": reason}, status=409)
        registered = b'{"ok": true, "gpus": ' + json.dumps(registry.gpus_of(msg.type, msg.index)).encode()
        writer = registry.writer_of(msg.type, msg.index, msg.container_id)
        if writer is not None:  # elastic: whether this container writes the output (not IS_CHIEF: the role moves)
            registered += b', "writer": ' + json.dumps(writer).encode()
        if registry.sealed_hdfs_token:  # a task starting after the job's first token expired stages with this one
            registered += b', "hdfs_token": ' + json.dumps(registry.sealed_hdfs_token).encode()
        if wait <= 0:
            return web.Response(body=registered + b"}", content_type="application/json")
        return await spec_answer(request, msg.attempt, wait, (msg.type, msg.index), msg.container_id,
                                 prefix=registered)

    async def spare(request: web.Request) -> web.Response:
        """An elastic job's spare waits (a long poll, `?wait=S`) to be told the lost worker it becomes
        (core/am/spares.py): {"state": "take", "index": N}, {"state": "wait"} (ask again) or {"state": "stop"}."""
        try:
            wait = _wait_of(request, default=LONG_POLL_S)
        except ValueError:
            return web.json_response({"error": "wait must be a number of seconds"}, status=400)
        msg = await message(request, protocol.SpareWaits)
        state, index = await registry.wait_spare(msg.spare, msg.attempt, msg.host, msg.container_id, wait)
        return web.json_response({"state": state, "index": index})

    async def cluster_spec(request: web.Request) -> web.StreamResponse:
        try:
            attempt = int(request.query.get("attempt", "0"))
            wait = _wait_of(request, default=LONG_POLL_S)
            task = (request.query["type"], int(request.query["index"])) if "type" in request.query else None
        except (KeyError, ValueError):
            return web.json_response({"error": "attempt, wait and index must be numbers"}, status=400)
        return await spec_answer(request, attempt, wait, task, request.query.get("container", ""))

    async def spec_answer(request: web.Request, attempt: int, wait: float, task: tuple[str, int] | None,
                          container_id: str, prefix: bytes = b"") -> web.StreamResponse:
        """The long poll's answer, after `prefix` (the fields of the register answer) when given. The
        spec is serialized (and compressed) once per attempt, never per waiter: that made a gang's
        start O(n²) in time and memory."""
        state, spec = await registry.wait_spec(attempt, wait, task, container_id)
        if state != "ready":
            body = json.dumps(asdict(protocol.ClusterSpecAnswer(state, spec))).encode()
            if prefix:  # both are JSON objects: one object with both's fields
                body = prefix + b", " + body[1:]
            return web.Response(body=body, content_type="application/json")
        head = prefix + b", " if prefix else b"{"
        headers = {"Content-Type": "application/json"}
        if "gzip" in request.headers.get("Accept-Encoding", ""):
            # n executors each get a spec of n hosts: n² bytes, a quarter of them compressed. Two gzip
            # members (RFC 1952 §2.2): this answer's head, then the spec's tail compressed once
            head, rest = gzip.compress(head, mtime=0), memoryview(ready_gzip.tail(registry.ready_answer))
            headers["Content-Encoding"] = "gzip"
        else:
            rest = memoryview(registry.ready_answer)[1:]
        response = web.StreamResponse(headers=headers)
        response.content_length = len(head) + len(rest)
        await response.prepare(request)
        await response.write(head)
        await response.write(rest)  # the spec's bytes as they are: never copied per waiter
        await response.write_eof()
        return response

    async def heartbeat(request: web.Request) -> web.Response:
        msg = await message(request, protocol.Heartbeat)
        action = registry.heartbeat(msg.type, msg.index, msg.attempt, msg.usage, msg.container_id,
                                    msg.took_writer)
        if (action == "run" and msg.wait > 0 and registry.running(msg.type, msg.index, msg.attempt)
                and not registry.writer_handover(msg.container_id)):
            # held: a stop decided meanwhile is answered at once (an ended task's is not held: it is exiting),
            # as is the writer role moving to this container (its round waits for it to take the role)
            await registry.stop_news(min(float(msg.wait), MAX_HEARTBEAT_WAIT_S))
            action = registry.answer(msg.type, msg.index, msg.attempt, msg.container_id)
        answer: dict[str, str | int] = {"action": action}
        handover = registry.writer_handover(msg.container_id) if action == "run" else 0
        if handover:  # claim the output, take what HDFS holds, push; then say took_writer=<round>
            answer["writer"], answer["round"] = "take", handover
        if registry.sealed_hdfs_token:  # the newest HDFS token from the job's keytab (core/am/token_renewal.py)
            answer["hdfs_token"] = registry.sealed_hdfs_token
        return web.json_response(answer)

    async def finished(request: web.Request) -> web.Response:
        msg = await message(request, protocol.Finished)
        registry.finished(msg.type, msg.index, msg.attempt, msg.exit_code, msg.stderr_tail, msg.usage,
                          msg.container_id, memory_killed=msg.memory_killed)
        return web.json_response({"ok": True})

    async def output_in(request: web.Request) -> web.Response:
        msg = await message(request, protocol.Output)
        reason = outputs.receive(msg, registry.attempt)
        if reason is not None:
            return web.json_response({"error": reason}, status=409)
        return web.json_response({"ok": True})

    async def training_in(request: web.Request) -> web.Response:
        msg = await message(request, protocol.Training)
        reason = registry.training_report(msg.type, msg.index, msg.attempt, msg.report, msg.refused, msg.source,
                                          msg.container_id)
        if reason is not None:
            return web.json_response({"error": reason}, status=409)
        return web.json_response({"ok": True})

    async def training_json(request: web.Request) -> web.Response:
        return web.json_response(registry.training.page())

    async def output_out(request: web.Request) -> web.Response:
        try:
            offset = max(0, int(request.query.get("offset", "0")))
            attempt = int(request.query.get("attempt", "0"))
            limit = max(1, min(int(request.query.get("limit", SHIP_CHARS)), SHIP_CHARS))
        except ValueError:
            return web.json_response({"error": "offset, attempt and limit must be whole numbers"}, status=400)
        task = request.query.get("task") or None
        if task is not None and task not in outputs.task_ids:
            return web.json_response({"error": f"task: no {task!r} in this job; allowed: "
                                               + ", ".join(outputs.task_ids)}, status=404)
        state = registry.tasks.get(task_key(task or outputs.default))
        return web.json_response(outputs.answer(task, attempt, offset, bool(state and state.done), limit))

    async def rendezvous(request: web.Request) -> web.Response:
        """An elastic job's torchrun agents (core/am/rendezvous.py): join, next (a long poll for the round),
        heartbeat, leave, close, and the round's key-value space (kv; `get` long-polls for missing keys)."""
        try:
            msg = json.loads(await request.read())
            op, attempt, wait = str(msg["op"]), int(msg["attempt"]), max(0.0, min(float(msg.get("wait", 0)),
                                                                                  LONG_POLL_S))
        except (ValueError, KeyError, TypeError):
            return web.json_response({"error": "a rendezvous request is a JSON object with op and attempt"},
                                     status=400)
        rdzv = registry.rendezvous
        if rdzv is None or attempt != registry.attempt:
            return web.json_response({"error": "closed", "closed": True}, status=409)
        deadline = time.monotonic() + wait
        try:
            while True:
                now = time.monotonic()
                registry.rendezvous_tick(now)
                answer = _rendezvous_step(rdzv, op, msg, now)
                if not answer.get("missing") and answer.get("state") != "waiting" or now >= deadline:
                    return web.json_response(answer)
                await asyncio.sleep(RENDEZVOUS_POLL_S)
        except RendezvousError as exc:
            return web.json_response({"error": str(exc), "closed": rdzv.closed}, status=409)
        except (ValueError, KeyError, TypeError) as exc:
            return web.json_response({"error": f"rendezvous {op}: {exc}"}, status=400)

    async def status_json(request: web.Request) -> web.Response:
        status = registry.status()
        status["refused_requests"] = refused.count
        status["refused_sample"] = list(refused.sample)
        return web.json_response(status)

    async def progress_json(request: web.Request) -> web.Response:
        return web.json_response({"progress": registry.progress().to_dict(),
                                  "address": address() if address is not None else None,
                                  "training": registry.training.training})

    async def status_page(request: web.Request) -> web.Response:
        if page is None:
            raise web.HTTPFound(protocol.STATUS_JSON)
        return web.Response(text=page(), content_type="text/html")

    async def events(request: web.Request) -> web.Response:
        lines = [json.dumps(e, sort_keys=True, default=str) for e in (history.events if history else [])]
        return web.Response(text="".join(line + "\n" for line in lines), content_type="application/x-ndjson")

    def tensorboard_address() -> str | None:
        task = registry.tasks.get(("tensorboard", 0))
        return f"{task.host}:{task.port}" if task is not None and task.registered_at else None

    app = web.Application(middlewares=[authenticate], client_max_size=16 * 2**20)
    tensorboard_proxy.add_routes(app, tensorboard_address)
    app.router.add_post(protocol.REGISTER, register)
    app.router.add_get(protocol.CLUSTER_SPEC, cluster_spec)
    app.router.add_post(protocol.HEARTBEAT, heartbeat)
    app.router.add_post(protocol.FINISHED, finished)
    app.router.add_post(protocol.OUTPUT, output_in)
    app.router.add_get(OUTPUT_PATH, output_out)
    app.router.add_post(protocol.RENDEZVOUS, rendezvous)
    app.router.add_post(protocol.SPARE, spare)
    app.router.add_post(protocol.TRAINING, training_in)
    app.router.add_get(protocol.TRAINING_JSON, training_json)
    app.router.add_get(protocol.STATUS_JSON, status_json)
    app.router.add_get(protocol.PROGRESS_JSON, progress_json)
    app.router.add_get("/", status_page)
    app.router.add_get("/events.jsonl", events)
    app[REFUSED] = refused
    return app


def _rendezvous_step(rdzv: Rendezvous, op: str, msg: dict, now: float) -> dict:
    """One rendezvous request against the AM's state (core/am/rendezvous.py)."""
    name = str(msg.get("node", ""))
    if op == "join":
        rdzv.join(name, str(msg["task"]), str(msg["container"]), str(msg["addr"]), int(msg["port"]), now)
        return {"ok": True}
    if op == "next":
        return rdzv.next(name, now)
    if op == "heartbeat":
        return rdzv.heartbeat(name, int(msg["round"]), now)
    if op == "leave":
        rdzv.leave(name)
        return {"ok": True}
    if op == "close":
        rdzv.close()
        return {"ok": True}
    if op == "kv":
        return rdzv.kv(int(msg["round"]), str(msg["kv"]), [str(k) for k in msg.get("keys", [])],
                       [unb64(v) for v in msg.get("values", [])], int(msg.get("amount", 0)))
    raise RendezvousError(f"op: {op!r}; allowed: join, next, heartbeat, leave, close, kv")


def _wait_of(request: web.Request, default: float) -> float:
    """A long poll's `wait` query value, in seconds, within [0, LONG_POLL_S]."""
    return max(0.0, min(float(request.query.get("wait", default)), LONG_POLL_S))


async def start(app: web.Application, host: str = "0.0.0.0", port: int = 0) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=4096, reuse_address=True)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, bound

