"""The node admin's rules for the containers the executor starts itself (docker_runtime: engine).

YARN's own Docker runtime enforces them in container-executor, from `container-executor.cfg` in the
node's Hadoop configuration directory, section `[docker]`; the executor reads the same file, so one
admin setting governs both runtimes:

| key | allows | default (no file, no key) |
|---|---|---|
| `docker.allowed.ro-mounts` | read-only mounts of these sources, or of anything below them | none |
| `docker.allowed.rw-mounts` | read-write (and read-only) mounts of these sources, or below them | none |
| `tony.docker.allowed-users` | `--docker-user` values other than the YARN container's own user | none |

The rules govern what `--mount` adds and who the container runs as. What the executor mounts itself
needs none: the container's working directory (read-write: what YARN removes with the container), what
YARN localized into it, Hadoop's and Java's directories (read-only), and the job's own local --input
(read-only) and --output (read-write), which the container's own user reaches as a task without an
image would. A source is compared after normalization (`..` resolved, symlinks
followed), as container-executor does. The executor never runs a container privileged.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

CFG_NAME = "container-executor.cfg"
RO_KEY, RW_KEY, USERS_KEY = "docker.allowed.ro-mounts", "docker.allowed.rw-mounts", "tony.docker.allowed-users"


@dataclass(frozen=True)
class AdminRules:
    ro_mounts: tuple[str, ...] = ()
    rw_mounts: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    where: str = ""  # the file read, or "no <path>" when there is none

    @classmethod
    def load(cls, conf_dir: str | None) -> AdminRules:
        """The rules of the node whose configuration is `conf_dir` (HADOOP_CONF_DIR in the container)."""
        path = Path(conf_dir or "/etc/hadoop") / CFG_NAME
        try:
            text = path.read_text()
        except OSError:
            return cls(where=f"no {path}")
        docker = _section(text, "docker")
        return cls(_paths(docker.get(RO_KEY, "")), _paths(docker.get(RW_KEY, "")),
                   tuple(u.strip() for u in docker.get(USERS_KEY, "").split(",") if u.strip()), str(path))

    def refusal(self, mounts: Sequence[str], docker_user: str, own_user: str) -> str | None:
        """The one line refusing the first mount or user the rules do not allow; None: all allowed.
        `mounts`: the job's own choices, SRC:DST:MODE; `own_user`: the YARN container's uid:gid."""
        for mount in mounts:
            source, _, mode = _split(mount)
            allowed = self.rw_mounts if mode == "rw" else self.rw_mounts + self.ro_mounts
            if not any(_under(_real(source), permitted) for permitted in allowed):
                key = RW_KEY if mode == "rw" else RO_KEY
                return (f"mount {mount}: refused by this node's {key} ({self._listed(allowed)}); an admin "
                        "allows a source there")
        if docker_user and not _is_own(docker_user, own_user) and docker_user not in self.users:
            return (f"docker_user {docker_user}: refused by this node's {USERS_KEY} ({self._listed(self.users)}); "
                    f"the container runs as the YARN container's own user ({own_user}) unless an admin allows "
                    "another there")
        return None

    def _listed(self, values: Sequence[str]) -> str:
        if not values:
            return f"none: {self.where}" if self.where.startswith("no ") else f"none in {self.where}"
        return f"{', '.join(values)}, in {self.where}"


def _section(text: str, name: str) -> dict[str, str]:
    """`key=value` lines of one `[section]` of container-executor.cfg (its own format, not INI's: keys
    before any section belong to none)."""
    found: dict[str, str] = {}
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
            continue
        if current == name and "=" in line:
            key, _, value = line.partition("=")
            found[key.strip()] = value.strip()
    return found


def _paths(value: str) -> tuple[str, ...]:
    return tuple(_real(p.strip()) for p in value.split(",") if p.strip())


def _real(path: str) -> str:
    return os.path.realpath(path)


def _under(path: str, permitted: str) -> bool:
    return path == permitted or path.startswith(permitted.rstrip("/") + "/") or permitted == "/"


def _split(mount: str) -> tuple[str, str, str]:
    parts = mount.split(":")
    mode = parts[2] if len(parts) > 2 else "rw"
    return parts[0], parts[1] if len(parts) > 1 else parts[0], mode


def _is_own(user: str, own: str) -> bool:
    """`own` is uid:gid; the user may be given as that, as the uid, or as the uid's name."""
    uid = own.split(":")[0]
    if user in (own, uid):
        return True
    try:
        return str(pwd.getpwnam(user).pw_uid) == uid and ":" not in user
    except KeyError:
        return False
