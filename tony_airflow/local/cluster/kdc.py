"""The secure local cluster's KDC: MIT Kerberos run as a foreground `krb5kdc -n`.

Everything lives under `<state>/kdc`: a private `krb5.conf` (KRB5_CONFIG), the
KDC profile (KRB5_KDC_PROFILE), the principal database and the keytabs. Nothing
is written to /etc. The KDC listens on 127.0.0.1 (a port chosen free, TCP and UDP) and, for a
multi-host cluster, on the bridge address too, which is the one its krb5.conf names: the hosts'
namespaces reach it there. The client config says `udp_preference_limit = 1`, so Java and MIT
clients use TCP.
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tony_airflow.errors import ClusterError, UsageError
from tony_airflow.local.cluster.processes import pid_from_file, stop_from_file

REALM = "TONY.TEST"
SERVICE_HOST = "localhost"
# One service principal per daemon (name/host), and HTTP for SPNEGO under both names a
# client may use for this host (URLs here say 127.0.0.1; Hadoop's _HOST says localhost).
SERVICES = ("nn", "dn", "rm", "nm", "jhs")
HTTP_HOSTS = ("localhost", "127.0.0.1")
HOST_SERVICES = ("nm", "dn", "HTTP")  # a worker host's own principals (nm/_HOST, dn/_HOST, HTTP/_HOST)
# The user who submits jobs: the principal named as the OS user that runs the NodeManager.
# Containers run as that OS user (DefaultContainerExecutor), and the NodeManager's log
# aggregation (SecureIOUtils) refuses log files whose owner is not the application's user.
# The daemons' principals map to `hdfs` and `yarn` instead, so this user is not HDFS's superuser.
USER_PASSWORD = "tony-secure-local"  # only for `kinit` by hand; tests use the keytab
ENCTYPES = "aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal"
TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit", "klist")
MISSING_TOOLS = ("kerberos: {tools} not found; install MIT Kerberos "
                 "(Debian: apt-get install krb5-kdc krb5-admin-server krb5-user libkrb5-dev, "
                 "or run `make venv`)")

_KRB5_CONF = """\
[libdefaults]
  default_realm = {realm}
  dns_lookup_realm = false
  dns_lookup_kdc = false
  dns_canonicalize_hostname = false
  rdns = false
  udp_preference_limit = 1
  ticket_lifetime = 24h
  renew_lifetime = 7d
  forwardable = true
  default_ccache_name = FILE:{ccache}
  default_tkt_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
  default_tgs_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
  permitted_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96

[realms]
  {realm} = {{
    kdc = {address}:{port}
    admin_server = {address}:{port}
  }}

[domain_realm]
  localhost = {realm}
  127.0.0.1 = {realm}
"""

_KDC_CONF = """\
[kdcdefaults]
  kdc_listen = {listen}
  kdc_tcp_listen = {listen}

[realms]
  {realm} = {{
    database_name = {db}
    key_stash_file = {stash}
    acl_file = {acl}
    max_life = 24h
    max_renewable_life = 7d
    supported_enctypes = {enctypes}
    default_principal_flags = +renewable
  }}

[logging]
  kdc = FILE:{log}
"""


def service_principal(service: str, host: str = SERVICE_HOST) -> str:
    return f"{service}/{host}@{REALM}"


@dataclass(frozen=True)
class Kdc:
    """One KDC under `<state>/kdc`."""

    root: Path
    user: str = field(default_factory=getpass.getuser)

    @property
    def user_principal(self) -> str:
        return f"{self.user}@{REALM}"

    @property
    def krb5_conf(self) -> Path:
        return self.root / "krb5.conf"

    @property
    def kdc_conf(self) -> Path:
        return self.root / "kdc.conf"

    @property
    def service_keytab(self) -> Path:
        """nn, dn, rm, nm and HTTP: every daemon reads this one."""
        return self.root / "service.keytab"

    @property
    def user_keytab(self) -> Path:
        return self.root / "user.keytab"

    @property
    def pid_file(self) -> Path:
        return self.root / "krb5kdc.pid"

    @property
    def port_file(self) -> Path:
        return self.root / "port"

    @property
    def port(self) -> int:
        return int(self.port_file.read_text())

    def env(self) -> dict[str, str]:
        """What a Kerberos client (MIT or, through JAVA options, Java) needs to use this KDC."""
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf),
                "KRB5CCNAME": f"FILE:{self.root / 'ccache'}"}

    # ------------------------------------------------------------------ set-up
    def create(self, port: int, address: str = "127.0.0.1", hosts: tuple[str, ...] = ()) -> None:
        """Write the configuration, create the database, the principals and the keytabs (once per set of
        hosts). `address`: where clients reach the KDC (a multi-host cluster's bridge); `hosts`: the worker
        hosts, each with its own nm/, dn/ and HTTP/ principal (Hadoop's `_HOST` becomes the host's name)."""
        missing = [t for t in TOOLS if shutil.which(t) is None and not Path("/usr/sbin", t).exists()]
        if missing:
            raise UsageError(MISSING_TOOLS.format(tools=", ".join(missing)))
        self.root.mkdir(parents=True, exist_ok=True)
        self.port_file.write_text(f"{port}\n")
        self._write_conf(port, address)
        principals = [service_principal(s) for s in SERVICES]
        principals += [service_principal("HTTP", h) for h in dict.fromkeys((*HTTP_HOSTS, address))]
        principals += [service_principal(s, h) for h in hosts for s in HOST_SERVICES]
        made = self.root / "principals"
        if (self.root / "principal").exists() and self.service_keytab.exists() and self.user_keytab.exists() \
                and made.exists() and made.read_text().split() == principals:
            return
        for stale in self.root.glob("principal*"):
            stale.unlink()
        self._run("kdb5_util", "create", "-s", "-r", REALM, "-P", os.urandom(12).hex())
        for principal in principals:
            self._admin(f"addprinc -randkey {principal}")
        self._admin(f"addprinc -pw {USER_PASSWORD} {self.user_principal}")
        for keytab in (self.service_keytab, self.user_keytab):
            keytab.unlink(missing_ok=True)
        self._admin(f"ktadd -k {self.service_keytab} -norandkey " + " ".join(principals))
        self._admin(f"ktadd -k {self.user_keytab} -norandkey {self.user_principal}")
        for keytab in (self.service_keytab, self.user_keytab):
            keytab.chmod(0o600)
        made.write_text("\n".join(principals) + "\n")

    def _write_conf(self, port: int, address: str = "127.0.0.1") -> None:
        listen = ", ".join(f"{a}:{port}" for a in dict.fromkeys(("127.0.0.1", address)))
        self.krb5_conf.write_text(_KRB5_CONF.format(realm=REALM, port=port, address=address,
                                                    ccache=self.root / "ccache"))
        self.kdc_conf.write_text(_KDC_CONF.format(
            realm=REALM, port=port, listen=listen, db=self.root / "principal", stash=self.root / "stash",
            acl=self.root / "kadm5.acl", enctypes=ENCTYPES, log=self.root / "krb5kdc.log"))
        (self.root / "kadm5.acl").write_text(f"*/admin@{REALM} *\n")

    def _tool_env(self) -> dict[str, str]:
        return {**os.environ, **self.env()}

    def _run(self, *cmd: str) -> None:
        tool = shutil.which(cmd[0]) or str(Path("/usr/sbin", cmd[0]))
        proc = subprocess.run([tool, *cmd[1:]], env=self._tool_env(), capture_output=True, text=True,
                              stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ClusterError(f"kerberos: {cmd[0]} {cmd[1]} failed (exit {proc.returncode}): {tail[0]}")

    def _admin(self, query: str) -> None:
        self._run("kadmin.local", "-r", REALM, "-q", query)

    # ------------------------------------------------------------------ process
    def pid(self) -> int | None:
        return pid_from_file(self.pid_file, b"krb5kdc")

    def start(self, log_dir: Path, timeout: float = 20.0) -> None:
        """Start `krb5kdc -n` (foreground) unless it runs, and wait until it issues tickets."""
        if self.pid() is not None:
            return
        out = (log_dir / "krb5kdc.out").open("w")
        tool = shutil.which("krb5kdc") or "/usr/sbin/krb5kdc"
        proc = subprocess.Popen([tool, "-n", "-r", REALM], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=self._tool_env(), start_new_session=True)
        out.close()
        self.pid_file.write_text(f"{proc.pid}\n")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ClusterError(f"kerberos: krb5kdc exited during start (exit {proc.returncode}); "
                                   f"see {log_dir / 'krb5kdc.out'}")
            if self.can_login():
                return
            time.sleep(0.2)
        raise ClusterError(f"kerberos: the KDC on port {self.port} issued no ticket within {timeout:.0f}s")

    def can_login(self) -> bool:
        """A ticket for the user from its keytab, into a throw-away cache: the KDC answers."""
        env = {**self._tool_env(), "KRB5CCNAME": f"MEMORY:probe-{os.getpid()}"}
        tool = shutil.which("kinit") or "/usr/bin/kinit"
        proc = subprocess.run([tool, "-k", "-t", str(self.user_keytab), self.user_principal], env=env,
                              capture_output=True, stdin=subprocess.DEVNULL)
        return proc.returncode == 0

    def stop(self) -> None:
        stop_from_file(self.pid_file, b"krb5kdc", grace=5.0)

    def health(self) -> str:
        pid = self.pid()
        if pid is None:
            return "stopped"
        return f"running (pid {pid}, realm {REALM}, port {self.port})"
