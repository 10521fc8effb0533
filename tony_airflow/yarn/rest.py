"""The ResourceManager REST API (`/ws/v1/cluster`), synchronous and asynchronous.

Both clients share one description of each call (`_Call`) and differ only in
the transport, so the Airflow trigger (async) and everything else (sync) see
exactly the same answers. Several addresses mean RM HA: the one that last answered as active is asked
first; a dead one or a standby that knows no active RM passes the call to the next (one that knows
redirects it there: followed), as Hadoop's ConfiguredRMFailoverProxyProvider does.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import httpx

from tony_airflow.errors import ClusterError, ClusterUnreachable
from tony_airflow.yarn.discovery import require_conf_dir
from tony_airflow.yarn.failover import failover_rounds, ordered, rm_is_standby
from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.hadoop_tls import ssl_context, tls_verify
from tony_airflow.yarn.kerberos import KerberosLogin, rm_http_auth
from tony_airflow.yarn.lazy_tls import LazyTLSTransport


class YarnState(StrEnum):
    """YARN's YarnApplicationState."""

    NEW = "NEW"
    NEW_SAVING = "NEW_SAVING"
    SUBMITTED = "SUBMITTED"
    ACCEPTED = "ACCEPTED"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"


class FinalStatus(StrEnum):
    """YARN's FinalApplicationStatus: what an application that ended achieved."""

    UNDEFINED = "UNDEFINED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"


# How long a blocking call waits for an HA pair to elect an active RM (the RM's ZooKeeper session must
# expire first: 10 s by default) before it says none answered; waiters with more patience loop on that.
RM_FAILOVER_WAIT_S = 60.0

TERMINAL_STATES = frozenset({YarnState.FINISHED, YarnState.FAILED, YarnState.KILLED})
ACTIVE_STATES = tuple(s for s in YarnState if s not in TERMINAL_STATES)
APPLICATION_ID = re.compile(r"application_\d+_\d+")  # use fullmatch: `$` would admit a trailing newline


def is_application_id(text: object) -> bool:
    """The one check of a YARN application id, for every front end."""
    return isinstance(text, str) and APPLICATION_ID.fullmatch(text) is not None


# Hadoop's ContainerId.fromString: container_[e<epoch>_]<cluster timestamp>_<app>_<attempt>_<container>; the
# epoch part appears once the ResourceManager has restarted or failed over (work-preserving recovery)
CONTAINER_ID = re.compile(r"container_(?:e\d+_)?(\d+)_(\d+)_(\d+)_\d+")


def application_of_container(container_id: str) -> str:
    """The application a container id belongs to ('' when the text is not a container id), formatted as
    Hadoop's ApplicationId.toString does (the sequence number padded to four digits)."""
    found = CONTAINER_ID.fullmatch(container_id)
    return f"application_{found[1]}_{int(found[2]):04d}" if found else ""


def attempt_of_container(container_id: str) -> int:
    """The application attempt a container id names (0 when the text is not a container id)."""
    found = CONTAINER_ID.fullmatch(container_id)
    return int(found[3]) if found else 0


class ResourceManagerError(ClusterError):
    """No ResourceManager answered, or it refused the call. `transient`: none answered, or one answered
    5xx (busy, standby, failing over): asking again later may succeed, as Hadoop's RM proxy does.
    `unanswered`: none answered as the active RM (all down or standby)."""

    def __init__(self, message: str, transient: bool = False, unanswered: bool = False, status: int = 0):
        super().__init__(message)
        self.transient = transient
        self.unanswered = unanswered  # no RM answered as the active one: down, or an election in progress
        self.status = status  # the HTTP status the RM answered with (404: no such application); 0: none


class NoActiveResourceManager(ResourceManagerError, ClusterUnreachable):
    """A round in which no ResourceManager answered as the active one: asked again while time is left.
    Out of time, the cluster was not reached (exit code 69), which is not a job's failure."""


@dataclass(frozen=True)
class ApplicationReport:
    """The fields of an RM application report that this project acts on."""

    id: str
    state: str
    final_status: str
    diagnostics: str = ""
    tracking_url: str = ""
    name: str = ""
    user: str = ""
    queue: str = ""
    tags: tuple[str, ...] = ()
    started_time: int = 0
    finished_time: int = 0
    elapsed_ms: int = 0
    # what the application used, summed by the RM (resourceSecondsMap): (resource, units x seconds),
    # e.g. ("memory-mb", 123456), ("vcores", 240), ("yarn.io/gpu", 60)
    resource_seconds: tuple[tuple[str, int], ...] = ()
    # Hadoop's LogAggregationStatus (NOT_START, RUNNING, SUCCEEDED, ...): whether the NodeManagers have
    # uploaded a finished application's logs; "" when the RM does not say
    log_aggregation: str = ""

    @classmethod
    def from_json(cls, app: dict[str, Any]) -> ApplicationReport:
        tags = tuple(t for t in (app.get("applicationTags") or "").split(",") if t)
        return cls(
            id=app["id"], state=app.get("state", ""), final_status=app.get("finalStatus", ""),
            diagnostics=app.get("diagnostics") or "", tracking_url=app.get("trackingUrl") or "",
            name=app.get("name", ""), user=app.get("user", ""), queue=app.get("queue", ""),
            tags=tags, started_time=app.get("startedTime", 0), finished_time=app.get("finishedTime", 0),
            elapsed_ms=app.get("elapsedTime") or 0, resource_seconds=_resource_seconds(app),
            log_aggregation=app.get("logAggregationStatus") or "",
        )

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES


def _keep_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The RM writes a map as repeated keys ({"entry": {..}, "entry": {..}}): keep them all, as a list."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            out[key] = (out[key] if isinstance(out[key], list) else [out[key]]) + [value]
        else:
            out[key] = value
    return out


def _resource_seconds(app: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    """memorySeconds and vcoreSeconds, with every resource of resourceSecondsMap (GPUs) over them."""
    found = {"memory-mb": int(app.get("memorySeconds") or 0), "vcores": int(app.get("vcoreSeconds") or 0)}
    entries = (app.get("resourceSecondsMap") or {}).get("entry") or []
    for entry in [entries] if isinstance(entries, dict) else entries:
        if isinstance(entry, dict) and entry.get("key"):
            found[str(entry["key"])] = int(entry.get("value") or 0)
    return tuple(sorted(found.items()))


@dataclass(frozen=True)
class _Call:
    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    json: dict[str, Any] | None = None


def _app_call(app_id: str) -> _Call:
    return _Call("GET", f"/ws/v1/cluster/apps/{app_id}")


def _kill_call(app_id: str, user: str) -> _Call:
    return _Call("PUT", f"/ws/v1/cluster/apps/{app_id}/state", {"user.name": user}, {"state": "KILLED"})


def _apps_call(states: Iterable[str] | None, tags: Iterable[str] | None, finished_since_ms: int | None = None,
               user: str | None = None) -> _Call:
    """RMWebServices' getApps: `tags` any of them; `finished_since_ms` only applications that ended since."""
    params = {}
    if states:
        params["states"] = ",".join(states)
    if tags:
        params["applicationTags"] = ",".join(tags)
    if finished_since_ms is not None:
        params["finishedTimeBegin"] = str(finished_since_ms)
    if user:
        params["user"] = user
    return _Call("GET", "/ws/v1/cluster/apps", params)


def _parse_apps(body: dict[str, Any]) -> list[ApplicationReport]:
    return [ApplicationReport.from_json(a) for a in ((body.get("apps") or {}).get("app") or [])]


class _Base:
    def __init__(self, addresses: list[str] | str, user: str | None = None, timeout: float = 10.0,
                 auth: httpx.Auth | None = None, verify: str | bool = True, origin: str = ""):
        """`origin`: where the addresses came from (`HADOOP_CONF_DIR=…`, an Airflow connection), said when
        none answers so the user knows which setting to look at."""
        self.origin = origin
        self.addresses = [addresses] if isinstance(addresses, str) else list(addresses)
        if not self.addresses:
            raise ValueError("at least one ResourceManager address is needed")
        self.addresses = [a if "://" in a else f"http://{a}" for a in self.addresses]
        self.user = user or os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
        self.timeout = timeout
        self.auth = auth
        self.verify = ssl_context(verify)  # HTTPS: ssl-client.xml's truststore, or True (the system's CAs)
        self._active = 0  # the address that last answered as the active RM: asked first (HA)
        self.failover_wait_s = RM_FAILOVER_WAIT_S

    @property
    def active_address(self) -> str:
        """The address that last answered as the active RM (the first, before any call)."""
        return self.addresses[self._active]

    @classmethod
    def from_conf(cls, conf: HadoopConf | None = None, login: KerberosLogin | None = None, **kwargs: Any):
        """The RMs of a configuration; on a Kerberos cluster authenticated as `login` (see rm_http_auth)."""
        if conf is None:
            conf_dir = require_conf_dir()
            conf = HadoopConf.load(conf_dir)
        if "auth" not in kwargs:
            kwargs["auth"] = rm_http_auth(conf.get("hadoop.security.authentication"), login)
        addresses = conf.rm_web_addresses()
        if "verify" not in kwargs and any(a.startswith("https:") for a in addresses):
            kwargs["verify"] = tls_verify(conf)
        kwargs.setdefault("origin", f"HADOOP_CONF_DIR={conf.conf_dir}")
        return cls(addresses, **kwargs)

    def _outcome(self, index: int, resp: httpx.Response | httpx.TransportError, call: _Call,
                 errors: list[str], refused: list[httpx.Response]) -> tuple[bool, dict[str, Any]]:
        """(True, the answer) from the active RM; (False, {}) with the reason noted when this one is dead, a
        standby that knows no active one (one that does redirected the call there: followed), or, with HA,
        one that refused to authenticate the call: a standby authenticates before it redirects and has not
        loaded the RM's delegation tokens (403 InvalidToken), so the others are asked before a refusal
        stands (`_refusal`). A refusal served nothing: asking another RM applies nothing twice."""
        base = self.addresses[index]
        if isinstance(resp, httpx.TransportError):
            errors.append(f"{base}: {resp or type(resp).__name__}")
            return False, {}
        if rm_is_standby(resp.status_code, resp.text[:200]):
            errors.append(f"{base}: standby, no active ResourceManager known to it")
            return False, {}
        if resp.status_code in (401, 403) and len(self.addresses) > 1:
            refused.append(resp)
            errors.append(f"{base}: refused (HTTP {resp.status_code})")
            return False, {}
        self._active = index
        return True, self._check(resp, call)

    def _refusal(self, refused: list[httpx.Response], call: _Call) -> None:
        """Raise the refusal that stands when no RM served the call: one that is not a standby's unknown
        token, if there is one."""
        if refused:
            real = [r for r in refused if "can't be found in cache" not in r.text] or refused
            self._check(real[0], call)

    def _none_active(self, errors: list[str]) -> ResourceManagerError:
        origin = f" (addresses from {self.origin})" if self.origin else ""
        return NoActiveResourceManager(f"no active ResourceManager answered{origin}: " + "; ".join(errors),
                                       transient=True, unanswered=True)

    @staticmethod
    def _check(resp: httpx.Response, call: _Call) -> dict[str, Any]:
        if resp.status_code >= 400:
            try:
                msg = resp.json()["RemoteException"]["message"]
            except (ValueError, KeyError, TypeError):
                msg = resp.text[:300]
            if resp.status_code == 401:
                msg = "not authenticated (this ResourceManager wants Kerberos: kinit, or give a keytab)"
            raise ResourceManagerError(f"{call.method} {call.path}: HTTP {resp.status_code}: {msg}",
                                       transient=resp.status_code >= 500, status=resp.status_code)
        return json.loads(resp.content, object_pairs_hook=_keep_repeated_keys) if resp.content else {}


class ResourceManagerClient(_Base):
    """Blocking client, for the CLI, the core client and Airflow's hook. One HTTP client (one SSL
    context, one connection pool) serves all its calls: building one costs ~25 ms of CPU, which a
    client polling every second would otherwise take from the training it waits for."""

    _http: httpx.Client | None = None
    _http_lock = threading.Lock()

    @property
    def http(self) -> httpx.Client:
        """The HTTP client of every call, with this client's authentication; made on first use."""
        with self._http_lock:
            if self._http is None:
                self._http = httpx.Client(timeout=self.timeout, auth=self.auth, follow_redirects=True,
                                          transport=LazyTLSTransport(self.verify))
            return self._http

    def fetch(self, url: str, timeout: float | None = None) -> httpx.Response:
        """GET an absolute URL of this cluster (an AM's page through the RM's proxy) with the same client."""
        return self.http.get(url, timeout=self.timeout if timeout is None else timeout)

    def close(self) -> None:
        with self._http_lock:
            http, self._http = self._http, None
        if http is not None:
            http.close()

    def _do(self, call: _Call) -> dict[str, Any]:
        """The call, to the active RM. With HA, while none is active (an election after the active one
        died: seconds) the call waits up to `failover_wait_s` for one, as Hadoop's RM proxy does."""
        def one_round() -> dict[str, Any]:
            errors: list[str] = []
            refused: list[httpx.Response] = []
            for index in ordered(self.addresses, self._active):
                base = self.addresses[index]
                resp: httpx.Response | httpx.TransportError
                try:
                    resp = self.http.request(call.method, base + call.path, params=call.params, json=call.json)
                except httpx.TransportError as exc:
                    resp = exc
                served, body = self._outcome(index, resp, call, errors, refused)
                if served:
                    return body
            self._refusal(refused, call)
            raise self._none_active(errors)

        wait_s = self.failover_wait_s if len(self.addresses) > 1 else 0.0
        return failover_rounds(wait_s, NoActiveResourceManager)(one_round)

    def application(self, app_id: str) -> ApplicationReport:
        return ApplicationReport.from_json(self._do(_app_call(app_id))["app"])

    def kill(self, app_id: str) -> None:
        self._do(_kill_call(app_id, self.user))

    def applications(self, states: Iterable[str] | None = None,
                     tags: Iterable[str] | None = None) -> list[ApplicationReport]:
        return _parse_apps(self._do(_apps_call(states, tags)))

    def get(self, path: str, **params: str) -> dict[str, Any]:
        return self._do(_Call("GET", path, params))

    def new_application(self) -> str:
        """An application id to stage files under before submitting (Cluster New Application API)."""
        body = self._do(_Call("POST", "/ws/v1/cluster/apps/new-application", {"user.name": self.user}))
        return str(body["application-id"])

    def submit_application(self, context: dict[str, Any]) -> None:
        """Cluster Applications API (Submit): `context` is an application-submission-context."""
        self._do(_Call("POST", "/ws/v1/cluster/apps", {"user.name": self.user}, context))

    def delegation_token(self, renewer: str) -> dict[str, Any]:
        """Cluster Delegation Tokens API: a new RM delegation token (needs Kerberos: SPNEGO)."""
        return self._do(_Call("POST", "/ws/v1/cluster/delegation-token", json={"renewer": renewer}))


class AsyncResourceManagerClient(_Base):
    """Non-blocking client, for Airflow's triggerer. After `keep_open()` one connection pool serves
    every call (a shared poller's hundreds of calls) until `aclose()`; otherwise each call has its own."""

    _http: httpx.AsyncClient | None = None

    def _new_http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=self.timeout, auth=self.auth, follow_redirects=True, verify=self.verify)

    def keep_open(self) -> None:
        if self._http is None:
            self._http = self._new_http()

    async def aclose(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    async def _do(self, call: _Call) -> dict[str, Any]:
        if self._http is not None:
            return await self._do_with(self._http, call)
        async with self._new_http() as http:
            return await self._do_with(http, call)

    async def _do_with(self, http: httpx.AsyncClient, call: _Call) -> dict[str, Any]:
        errors: list[str] = []
        refused: list[httpx.Response] = []
        for index in ordered(self.addresses, self._active):
            base = self.addresses[index]
            resp: httpx.Response | httpx.TransportError
            try:
                resp = await http.request(call.method, base + call.path, params=call.params, json=call.json)
            except httpx.TransportError as exc:
                resp = exc
            served, body = self._outcome(index, resp, call, errors, refused)
            if served:
                return body
        self._refusal(refused, call)
        raise self._none_active(errors)

    async def application(self, app_id: str) -> ApplicationReport:
        return ApplicationReport.from_json((await self._do(_app_call(app_id)))["app"])

    async def kill(self, app_id: str) -> None:
        await self._do(_kill_call(app_id, self.user))

    async def applications(self, states: Iterable[str] | None = None, tags: Iterable[str] | None = None,
                           finished_since_ms: int | None = None, user: str | None = None) -> list[ApplicationReport]:
        return _parse_apps(await self._do(_apps_call(states, tags, finished_since_ms, user)))
