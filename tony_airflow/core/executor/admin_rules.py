"""The node admin's rules for the containers the executor starts itself (docker_runtime: engine).

YARN's own Docker runtime enforces them in container-executor, from `container-executor.cfg` in the
node's Hadoop configuration directory, section `[docker]`; the executor reads the same file, so one
admin setting governs both runtimes:

| key | allows | default (no file, no key) |
|---|---|---|
| `docker.allowed.ro-mounts` | read-only mounts of these sources, or of anything below them | none |
| `docker.allowed.rw-mounts` | read-write (and read-only) mounts of these sources, or below them | none |
| `tony.docker.allowed-users` | `--docker-user` values (UID:GID) other than the YARN container's own | none |

A name in `tony.docker.allowed-users` is this node's user, allowed as its uid with its primary group.

The rules govern what `--mount` adds and who the container runs as. What the executor mounts itself
needs none: the container's working directory (read-write: what YARN removes with the container), what
YARN localized into it, Hadoop's and Java's directories (read-only), and the job's own local --input
(read-only) and --output (read-write), which the container's own user reaches as a task without an
image would. What is checked is what the engine gets: a mount's source with `..` and symlinks resolved
(`engine_mount`, which is also what `docker run` is given, so a symlink changed after the check changes
nothing), and the user as the numeric uid:gid the container runs as (a name or a bare uid would be resolved
by the engine inside the image, where a name can be uid 0 and a bare uid gets gid 0: refused). The executor
never runs a container privileged.
"""

from __future__ import annotations

import os
import pwd
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

CFG_NAME = "container-executor.cfg"
RO_KEY, RW_KEY, USERS_KEY = "docker.allowed.ro-mounts", "docker.allowed.rw-mounts", "tony.docker.allowed-users"
_NUMERIC_USER = re.compile(r"[0-9]+:[0-9]+")  # as core/spec_values.check_docker_user takes it


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
        `mounts`: the job's own choices, SRC:DST:MODE (checked as `engine_mount` gives them to the engine);
        `own_user`: the YARN container's uid:gid."""
        for mount in mounts:
            source, _, mode = _split(engine_mount(mount))
            allowed = self.rw_mounts if mode == "rw" else self.rw_mounts + self.ro_mounts
            if not any(_under(source, permitted) for permitted in allowed):
                key = RW_KEY if mode == "rw" else RO_KEY
                resolved = "" if source == _split(mount)[0] else f" (source {source})"
                return (f"mount {mount}{resolved}: refused by this node's {key} ({self._listed(allowed)}); an "
                        "admin allows a source there")
        if docker_user and not _NUMERIC_USER.fullmatch(docker_user):
            return (f"docker_user {docker_user}: not UID:GID; the engine would resolve it in the image (a name can "
                    "be uid 0 there, a bare uid gets gid 0), so no rule can allow it")
        if docker_user and docker_user != own_user and docker_user not in self._allowed_users():
            return (f"docker_user {docker_user}: refused by this node's {USERS_KEY} ({self._listed(self.users)}); "
                    f"the container runs as the YARN container's own user ({own_user}) unless an admin allows "
                    "another there")
        return None

    def _allowed_users(self) -> set[str]:
        """The listed users as uid:gid: numbers as they are, a name as this node's user and primary group."""
        found = set()
        for user in self.users:
            if _NUMERIC_USER.fullmatch(user):
                found.add(user)
                continue
            try:
                entry = pwd.getpwnam(user)
            except KeyError:
                continue  # no such user on this node: allows nothing
            found.add(f"{entry.pw_uid}:{entry.pw_gid}")
        return found

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


def engine_mount(mount: str) -> str:
    """SRC:DST:MODE with the source resolved (`..`, symlinks): what the rules check and the engine mounts."""
    source, dest, mode = _split(mount)
    return f"{_real(source)}:{dest}:{mode}"


def _split(mount: str) -> tuple[str, str, str]:
    parts = mount.split(":")
    mode = parts[2] if len(parts) > 2 else "rw"
    return parts[0], parts[1] if len(parts) > 1 else parts[0], mode

