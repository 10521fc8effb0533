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
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.kerberos import KerberosLogin

log = logging.getLogger(__name__)

RENEW_RATIO = 0.75
RETRY_S = 10.0  # after a failed try (a NameNode failover, the KDC briefly away)
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


def obtain_hdfs_token(conf: HadoopConf, login: KerberosLogin) -> ObtainedToken:
    """A new HDFS delegation token for the keytab's principal, renewable by it, and when it expires."""
    from tony_airflow.yarn.failover import active_namenode_call
    from tony_airflow.yarn.hadoop_addresses import namenodes
    from tony_airflow.yarn.hadoop_tls import tls_verify
    from tony_airflow.yarn.kerberos import spnego
    from tony_airflow.yarn.tokens import delegation_identifier, from_url_string

    assert login.principal
    logging.getLogger("httpx").addFilter(_REDACTING)  # once: a filter is added only if not there yet
    nns = namenodes(conf)
    verify = tls_verify(conf) if any(w.startswith("https:") for w in nns.web) else True
    auth = spnego(login)
    answer = active_namenode_call(nns.web, "GET", "/webhdfs/v1/", auth=auth, verify=verify,
                                  params={"op": "GETDELEGATIONTOKEN", "renewer": short_name(login.principal)})
    url = answer["Token"]["urlString"]
    renewed = active_namenode_call(nns.web, "PUT", "/webhdfs/v1/", auth=auth, verify=verify,
                                   params={"op": "RENEWDELEGATIONTOKEN", "token": url})
    ident = delegation_identifier(from_url_string(url))
    return ObtainedToken(url, ident.issue_ms / 1000, int(renewed["long"]) / 1000, ident.max_ms / 1000)


class TokenRenewal:
    """A thread that obtains a new HDFS token before the current one expires, and hands each to `use`."""

    def __init__(self, obtain: Callable[[], ObtainedToken], use: Callable[[ObtainedToken], object],
                 clock: Callable[[], float] = time.time):
        self.obtain, self.use, self.clock = obtain, use, clock
        self.stopped = threading.Event()
        self.obtained = 0
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
        except Exception as exc:  # the current token may still be good for a while: try again soon
            log.warning("could not obtain a new HDFS delegation token (will retry in %.0f s): %s", RETRY_S, exc)
            return RETRY_S
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
