"""Kerberos for the clients: who we are (a keytab, a ticket cache, or Hadoop tokens) and SPNEGO over HTTP.

A keytab is read without `kinit`: its ticket goes into a MEMORY credential cache private
to this process, so nothing on disk changes and no other process sees it. Without a
keytab, the default ticket cache (`kinit`) is used. A container has neither: it holds the
Hadoop delegation tokens YARN gave it (`yarn.tokens`), never a keytab.

gssapi and httpx-gssapi are the optional `kerberos` extra, imported only here and only
when a cluster says `hadoop.security.authentication=kerberos`.
"""

from __future__ import annotations

import itertools
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tony_airflow.errors import UsageError
from tony_airflow.yarn.hadoop_conf import is_kerberos

NEEDS_EXTRA = "kerberos: this cluster uses Kerberos, which needs gssapi and httpx-gssapi; " \
              "pip install 'tony-airflow[kerberos]'"
NO_CREDENTIALS = ("kerberos: no Kerberos ticket and no Hadoop delegation tokens for a Kerberos cluster; "
                  "run `kinit <principal>` or give --principal and --keytab")
_memory_caches = itertools.count()
_lock = threading.Lock()


@dataclass(frozen=True)
class KerberosLogin:
    """Who the client is on a Kerberos cluster: a principal with its keytab, else the ticket cache."""

    principal: str | None = None
    keytab: str | None = None

    def __post_init__(self) -> None:
        if bool(self.principal) != bool(self.keytab):
            missing = "--keytab" if self.principal else "--principal"
            raise UsageError(f"{missing}: a keytab login needs both --principal and --keytab")
        if self.keytab and not Path(self.keytab).is_file():
            raise UsageError(f"--keytab: {self.keytab} is not a readable file")

    @property
    def uses_keytab(self) -> bool:
        return bool(self.keytab)


def _gssapi() -> Any:
    try:
        import gssapi
    except ImportError:
        raise UsageError(NEEDS_EXTRA) from None
    return gssapi


_keytab_credentials: dict[tuple[str, str], Any] = {}


def credentials(login: KerberosLogin | None = None) -> Any:
    """gssapi initiator credentials: from the keytab (a MEMORY cache, once per keytab) or the ticket cache.

    Raises UsageError (one line) when there are none."""
    gssapi = _gssapi()
    login = login or KerberosLogin()
    if login.uses_keytab:
        assert login.principal and login.keytab
        key = (login.principal, str(Path(login.keytab).absolute()))
        with _lock:
            if key not in _keytab_credentials:
                name = gssapi.Name(login.principal, gssapi.NameType.kerberos_principal)
                store = {"client_keytab": key[1], "ccache": f"MEMORY:tony-{os.getpid()}-{next(_memory_caches)}"}
                try:
                    _keytab_credentials[key] = gssapi.Credentials(name=name, usage="initiate", store=store)
                except gssapi.exceptions.GSSError as exc:
                    raise UsageError(f"--keytab: no ticket for {login.principal} from {login.keytab}: "
                                     f"{_gss_reason(exc)}") from None
            return _keytab_credentials[key]
    try:
        creds = gssapi.Credentials(usage="initiate")
        if creds.lifetime == 0:
            raise UsageError(NO_CREDENTIALS)
        return creds
    except gssapi.exceptions.GSSError:
        raise UsageError(NO_CREDENTIALS) from None


def _gss_reason(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text.split("Minor (")[-1].split("): ", 1)[-1].rstrip(")") if "Minor (" in text else text


def spnego(login: KerberosLogin | None = None) -> httpx.Auth:
    """SPNEGO for httpx (sync and async), with the credentials of `login`."""
    creds = credentials(login)
    try:
        from httpx_gssapi import DISABLED, HTTPSPNEGOAuth
    except ImportError:
        raise UsageError(NEEDS_EXTRA) from None
    # The token goes with the first request (no 401 round trip per call); the server's answer token
    # is not verified (mutual authentication off): the ticket authenticates us, the URL names the server.
    return HTTPSPNEGOAuth(creds=creds, mutual_authentication=DISABLED, opportunistic_auth=True)


class RMDelegationTokenAuth(httpx.Auth):
    """The ResourceManager's REST API takes a delegation token in Hadoop's delegation-token header
    (its RMAuthenticationFilter; the documented `Hadoop-YARN-RM-Delegation-Token` is refused with 401
    by Hadoop 3.4.2): how a job given only Hadoop tokens (Azkaban, Oozie) polls and kills."""

    HEADER = "X-Hadoop-Delegation-Token"

    def __init__(self, url_string: str):
        self._token = url_string

    def auth_flow(self, request: httpx.Request):
        request.headers[self.HEADER] = self._token
        yield request


def rm_http_auth(authentication: str | None, login: KerberosLogin | None = None) -> httpx.Auth | None:
    """How to authenticate to the RM's REST API: nothing (simple auth), else a keytab's SPNEGO,
    else the RM delegation token of HADOOP_TOKEN_FILE_LOCATION, else the ticket cache's SPNEGO.

    Raises UsageError (one line, exit 2) when a Kerberos cluster finds none of them."""
    from tony_airflow.yarn.tokens import RM_DELEGATION_KIND, find_token

    if not is_kerberos(authentication):
        return None
    login = login or KerberosLogin()
    if not login.uses_keytab:
        token = find_token(RM_DELEGATION_KIND)
        if token is not None:
            return RMDelegationTokenAuth(token.url_string())
    return spnego(login)


def check_credentials(authentication: str | None, login: KerberosLogin | None = None) -> None:
    """Before anything is submitted: a Kerberos cluster needs a keytab, Hadoop tokens or a ticket."""
    from tony_airflow.yarn.tokens import token_file

    if not is_kerberos(authentication):
        return
    login = login or KerberosLogin()
    if login.uses_keytab:
        credentials(login)
    elif token_file() is None:
        credentials()
