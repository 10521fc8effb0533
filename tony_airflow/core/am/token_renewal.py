"""New HDFS delegation tokens from the job's keytab, before the old ones expire (issue #44 item 2).

YARN renews a running application's tokens only up to their maximum lifetime
(`dfs.namenode.delegation.token.max-lifetime`); a job that outlives it loses HDFS. A job
submitted with `--principal`/`--keytab` ships the keytab to its AM as a private local
resource, and the AM does what Spark's HadoopDelegationTokenManager does with
`spark.kerberos.keytab`: it logs in from the keytab, obtains a new HDFS token (itself its
renewer), renews it once to learn when it expires, and obtains the next one at
RENEW_RATIO of the time left (Spark's `spark.security.credentials.renewalRatio`). Each
new token is used by the AM's own WebHDFS calls at once and handed, sealed with the job's
secret, to its executors in their heartbeat answers.

A token obtained and then not renewed (RENEW refused: a renewer name the NameNode maps differently) is
cancelled at once, never left behind: it was fetched anew every 10 s, ~8,600 a day per job, none handed
out (issue 51). Failed tries back off (RETRY_S doubling up to MAX_RETRY_S) and are said once per run of
failures, in the AM's log and on the job's page (`on_failure`: a TOKEN_RENEWAL_FAILED event).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.kerberos import KerberosLogin

log = logging.getLogger(__name__)

RENEW_RATIO = 0.75
RETRY_S = 10.0  # after a failed try (a NameNode failover, the KDC briefly away)...
MAX_RETRY_S = 600.0  # ... doubling with each failure in a row, up to this
MIN_WAIT_S = 1.0

KEYTAB_FILE = ".tony-keytab"      # the job's keytab in the AM's container (a private local resource)
KEYTAB_ENV = "TONY_KEYTAB"        # ... its name there
PRINCIPAL_ENV = "TONY_PRINCIPAL"


@dataclass(frozen=True)
class ObtainedToken:
    url_string: str
    issued: float      # seconds since the epoch, as the NameNode stamped it
    expires: float     # unless renewed again: what the one renewal answered
    max_date: float    # no renewal goes past it

    def refresh_in(self, now: float) -> float:
        """When to obtain the next one: RENEW_RATIO of the time this one has left."""
        return max(MIN_WAIT_S, RENEW_RATIO * (min(self.expires, self.max_date) - now))


def short_name(principal: str) -> str:
    """Hadoop's DEFAULT auth_to_local rule: `user/host@REALM` -> `user` (the name a token's renewer is)."""
    return principal.split("@", 1)[0].split("/", 1)[0]


class RedactTokens(logging.Filter):
    """httpx logs every request's URL at INFO; WebHDFS's RENEWDELEGATIONTOKEN carries the token in it."""

    PATTERN = re.compile(r"((?:token|delegation)=)[^&\s\"']+")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = self.PATTERN.sub(r"\1<redacted>", message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        return True


_REDACTING = RedactTokens()


class RenewalFailed(RuntimeError):
    """A new token was obtained but could not be renewed (so its expiry is unknown): it was cancelled."""


NameNodeCall = Callable[[str, dict[str, str]], dict[str, Any]]  # (method, WebHDFS params) -> JSON answer


def obtain_hdfs_token(conf: HadoopConf, login: KerberosLogin) -> ObtainedToken:
    """A new HDFS delegation token for the keytab's principal, renewable by it, and when it expires."""
    from tony_airflow.yarn.failover import active_namenode_call
    from tony_airflow.yarn.hadoop_addresses import namenodes
    from tony_airflow.yarn.hadoop_tls import tls_verify
    from tony_airflow.yarn.kerberos import spnego

    assert login.principal
    logging.getLogger("httpx").addFilter(_REDACTING)  # once: a filter is added only if not there yet
    nns = namenodes(conf)
    verify = tls_verify(conf) if any(w.startswith("https:") for w in nns.web) else True
    auth = spnego(login)

    def call(method: str, params: dict[str, str]) -> dict[str, Any]:
        return active_namenode_call(nns.web, method, "/webhdfs/v1/", auth=auth, verify=verify, params=params)

    return obtain_with(call, short_name(login.principal))


def obtain_with(call: NameNodeCall, renewer: str) -> ObtainedToken:
    """GET a token renewable by `renewer`, RENEW it once to learn its expiry. A token whose RENEW fails is
    CANCELled before the error goes up: no token is obtained and left behind unused."""
    from tony_airflow.yarn.tokens import delegation_identifier, from_url_string

    url = call("GET", {"op": "GETDELEGATIONTOKEN", "renewer": renewer})["Token"]["urlString"]
    try:
        renewed = call("PUT", {"op": "RENEWDELEGATIONTOKEN", "token": url})
        ident = delegation_identifier(from_url_string(url))
        return ObtainedToken(url, ident.issue_ms / 1000, int(renewed["long"]) / 1000, ident.max_ms / 1000)
    except Exception as exc:
        try:
            call("PUT", {"op": "CANCELDELEGATIONTOKEN", "token": url})
            fate = "the new token was cancelled"
        except Exception as cancel_exc:  # it expires by itself at its renew interval (a day by default)
            fate = f"the new token could not be cancelled either ({cancel_exc}); it expires unrenewed"
        raise RenewalFailed(f"RENEWDELEGATIONTOKEN of a new HDFS token (renewer {renewer}: does the NameNode "
                            f"map the principal to that name?) failed: {exc}; {fate}") from None


class TokenRenewal:
    """A thread that obtains a new HDFS token before the current one expires, and hands each to `use`."""

    def __init__(self, obtain: Callable[[], ObtainedToken], use: Callable[[ObtainedToken], object],
                 clock: Callable[[], float] = time.time, on_failure: Callable[[str], object] | None = None):
        self.obtain, self.use, self.clock, self.on_failure = obtain, use, clock, on_failure
        self.stopped = threading.Event()
        self.obtained = 0
        self.failures = 0  # failed tries in a row
        self._thread = threading.Thread(target=self._run, name="token-renewal", daemon=True)

    def start(self) -> TokenRenewal:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()

    def step(self) -> float:
        """Obtain and hand over one token; how long to wait before the next."""
        try:
            token = self.obtain()
        except Exception as exc:  # the current token may still be good for a while: try again, less and less often
            self.failures += 1
            wait = min(MAX_RETRY_S, RETRY_S * 2 ** (self.failures - 1))
            if self.failures == 1:  # said once per run of failures: the log and the job page
                log.warning("could not obtain a new HDFS delegation token (will retry in %.0f s, then less and "
                            "less often, up to every %.0f s; the job goes on with the tokens it has): %s",
                            wait, MAX_RETRY_S, exc)
                if self.on_failure is not None:
                    self.on_failure(str(exc))
            else:
                log.debug("new HDFS delegation token: try %d failed (next in %.0f s): %s", self.failures, wait, exc)
            return wait
        if self.failures:
            log.info("a new HDFS delegation token was obtained after %d failed tries", self.failures)
        self.failures = 0
        self.obtained += 1
        self.use(token)
        wait = token.refresh_in(self.clock())
        log.info("new HDFS delegation token: expires %s unless renewed, at most until %s; the next in %.0f s",
                 _utc(token.expires), _utc(token.max_date), wait)
        return wait

    def _run(self) -> None:
        while not self.stopped.is_set():
            self.stopped.wait(self.step())


def _utc(seconds: float) -> str:
    from tony_airflow.core.history.model import when

    return f"{when(seconds)} UTC"
