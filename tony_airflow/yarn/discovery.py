"""Which cluster a client talks to, said once: an explicit configuration directory, else
HADOOP_CONF_DIR, else the local cluster that `tony cluster up` made.

The answer is a `ClusterConfig` value handed to whoever needs it (skein's driver,
the REST clients, WebHDFS, Hadoop's `yarn logs`); nothing here changes os.environ.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tony_airflow.errors import UsageError
from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.jvm import ADD_OPENS, LIGHT_JVM_FLAGS, find_java_home

NO_CLUSTER = ("HADOOP_CONF_DIR: not set and no local cluster exists; "
              "set it to your cluster's configuration or run `tony cluster up`")


def default_local_state_dir() -> Path:
    """Where `tony cluster up` keeps the local cluster: $TONY_CLUSTER_HOME, else under XDG state."""
    env = os.environ.get("TONY_CLUSTER_HOME")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state"))
    return base / "tony-airflow" / "cluster"


def cache_root() -> Path:
    """Where the project caches what it fetched or made (Hadoop jars, truststores in PEM): $TONY_CACHE_DIR,
    else ~/.cache/tony-airflow."""
    return Path(os.environ.get("TONY_CACHE_DIR", Path.home() / ".cache" / "tony-airflow"))


def local_environment(state_dir: Path) -> dict[str, str]:
    """What a user (and every child process) needs to use the local cluster at `state_dir`:
    its configuration, its `yarn`/`hdfs` launchers on PATH, Java 17 and its flags for skein."""
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join([str(state_dir / "bin"), venv_bin, os.environ.get("PATH", "")])
    driver_options = [*ADD_OPENS, *LIGHT_JVM_FLAGS]
    env = {
        "HADOOP_CONF_DIR": str(state_dir / "conf"),
        "JAVA_HOME": str(find_java_home()),
        "PATH": path,
    }
    krb5_conf = state_dir / "kdc" / "krb5.conf"
    if krb5_conf.exists() and HadoopConf.load(state_dir / "conf").kerberos:
        # `tony cluster up --secure`: its realm for MIT tools and gssapi, for Java, and its own ticket cache
        env["KRB5_CONFIG"] = str(krb5_conf)
        env["KRB5CCNAME"] = f"FILE:{state_dir / 'kdc' / 'ccache'}"
        driver_options.append(f"-Djava.security.krb5.conf={krb5_conf}")
    env["SKEIN_DRIVER_JAVA_OPTIONS"] = " ".join(driver_options)
    return env


@dataclass(frozen=True)
class ClusterConfig:
    """One cluster, resolved: its configuration and what skein's driver and Hadoop's CLI need."""

    conf_dir: Path
    environment: dict[str, str] = field(default_factory=dict)

    @property
    def hadoop(self) -> HadoopConf:
        return HadoopConf.load(self.conf_dir)

    @property
    def rm_addresses(self) -> list[str]:
        return self.hadoop.rm_web_addresses()

    @property
    def namenode_web_address(self) -> str:
        return self.hadoop.namenode_web_address()

    @property
    def auth(self) -> str:
        return self.hadoop.get("hadoop.security.authentication", "simple") or "simple"


def resolve_conf_dir() -> Path | None:
    """HADOOP_CONF_DIR if set, else the default local cluster's configuration if it exists."""
    env = os.environ.get("HADOOP_CONF_DIR")
    if env:
        return Path(env)
    conf = default_local_state_dir() / "conf"
    return conf if (conf / "yarn-site.xml").exists() else None


def require_conf_dir() -> Path:
    """resolve_conf_dir(), or the one line that says there is no cluster (exit 2)."""
    found = resolve_conf_dir()
    if found is None:
        raise UsageError(NO_CLUSTER)
    return found


def discover(conf_dir: str | Path | None = None) -> ClusterConfig:
    """The cluster to use; UsageError (one line) when there is none."""
    if conf_dir:
        state = Path(conf_dir).parent
        if (state / "bin" / "yarn").exists() and Path(conf_dir).name == "conf":
            # a local cluster's (tony cluster up): its launchers and Java come with it, whatever PATH is
            return ClusterConfig(Path(conf_dir), local_environment(state))
        return ClusterConfig(Path(conf_dir), {"HADOOP_CONF_DIR": str(conf_dir)})
    env = os.environ.get("HADOOP_CONF_DIR")
    if env:
        return ClusterConfig(Path(env), {"HADOOP_CONF_DIR": env})
    state = default_local_state_dir()
    if not (state / "conf" / "yarn-site.xml").exists():
        raise UsageError(NO_CLUSTER)
    return ClusterConfig(state / "conf", local_environment(state))
