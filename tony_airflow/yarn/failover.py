"""Finding the active one of several HA daemons over HTTP, as Hadoop's failover proxies do.

A standby ResourceManager answers its REST API with a 307 to the active one, or, while it knows of
none, with a page saying so (RMWebAppFilter); a standby NameNode answers WebHDFS with a
RemoteException whose class is StandbyException (ExceptionHandler maps it to 403). A dead address
refuses the connection. Each of these means "ask the next one"; only a request that was never
served is repeated, so nothing is applied twice. When every address said so, the callers ride it
out for as long as Hadoop's clients would (an election takes seconds).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import tenacity

from tony_airflow import retries
from tony_airflow.errors import ClusterError
from tony_airflow.yarn.hadoop_tls import ssl_context

if TYPE_CHECKING:  # httpx costs 0.07 s: the executor's path (WebHDFS through requests) never loads it
    import httpx

RM_STANDBY_TEXTS = ("This is standby RM", "There is no active RM right now", "Can not find any active RM")
# How long a NameNode caller keeps asking while no NameNode is active (ZKFC's failover: seconds), and the
# pause between rounds: WebHdfsFileSystem's failover policy, bounded (dfs.http.client.failover.*).
NN_FAILOVER_WAIT_S = 60.0
FAILOVER_SLEEP_BASE_S, FAILOVER_SLEEP_MAX_S = 0.5, 5.0



def rm_is_standby(status: int, text: str) -> bool:
    """A ResourceManager's answer that says "not me, and I know no active one" (RMWebAppFilter)."""
    return (status == 307 or status < 300) and any(text.lstrip().startswith(s) for s in RM_STANDBY_TEXTS)


def nn_is_standby(status: int, body: Any) -> bool:
    """A NameNode's WebHDFS answer that says it is standby (or observer) and cannot serve the call."""
    if status < 400 or not isinstance(body, dict):
        return False
    error = body.get("RemoteException") or {}
    if not isinstance(error, dict):
        return False
    name = str(error.get("exception") or "")
    return name == "StandbyException" or str(error.get("message") or "").endswith("StandbyException")


def ordered(addresses: Sequence[str], first: int) -> list[int]:
    """Indexes of `addresses`, the last one known active first (a failover proxy's current proxy)."""
    count = len(addresses)
    return [(first + i) % count for i in range(count)]


T = TypeVar("T")


class NoneActive(ClusterError):
    """A round in which no daemon served the call (each dead or standby): asked again while time is left."""


def within(wait_s: float, call: Callable[[], T], on_error: Callable[[Exception], None] | None = None) -> T:
    """`call()` until it returns, for up to `wait_s` (`failover_rounds`); its last error once the time is up.
    `on_error` sees each error that is tried again."""
    policy = failover_rounds(wait_s, Exception)
    if on_error is not None:
        policy = policy.copy(before_sleep=lambda state: on_error(state.outcome.exception()))
    return policy(call)


def failover_rounds(wait_s: float, retry_on: retries.Retryable) -> tenacity.Retrying:
    """The pace of rounds over HA daemons while none serves: retries.rounds with this module's pauses."""
    return retries.rounds(wait_s, FAILOVER_SLEEP_BASE_S, FAILOVER_SLEEP_MAX_S, retry_on)


def _json(resp: httpx.Response) -> Any:
    try:
        return resp.json()
    except ValueError:
        return None


def active_namenode_call(webs: Sequence[str], method: str, path: str, auth: httpx.Auth | None = None,
                         params: dict[str, str] | None = None, timeout: float = 30.0,
                         wait_s: float = NN_FAILOVER_WAIT_S, verify: str | bool = True) -> dict[str, Any]:
    """One WebHDFS call to whichever NameNode of `webs` is active (the JSON answer), failing over on a
    standby answer or a refused connection for up to `wait_s`; ClusterError with each one's reason."""
    import httpx

    with httpx.Client(auth=auth, timeout=timeout, follow_redirects=True, verify=ssl_context(verify)) as http:
        def one_round() -> dict[str, Any]:
            reasons = []
            for base in webs:
                try:
                    resp = http.request(method, base.rstrip("/") + path, params=params)
                except httpx.ConnectError as exc:
                    reasons.append(f"{base}: {exc or 'connection refused'}")
                    continue
                body = _json(resp)
                if nn_is_standby(resp.status_code, body):
                    reasons.append(f"{base}: standby")
                    continue
                if resp.status_code >= 400 or not isinstance(body, dict):
                    raise ClusterError(f"webhdfs: {base}{path}: HTTP {resp.status_code}: {resp.text[:200]}")
                return body
            raise NoneActive("webhdfs: no active NameNode: " + "; ".join(reasons))

        return failover_rounds(wait_s, NoneActive)(one_round)
