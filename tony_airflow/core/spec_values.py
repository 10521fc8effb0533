"""One field's value of a job spec: parsing and checking it, with the one line that refuses it.

Every refusal is a `UsageError` that names the field and what is allowed
(docs/submitting.md). core/spec.py assembles a whole JobSpec from these.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import tarfile
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tony_airflow.errors import UsageError

MAX_INSTANCES = 10_000          # per type; the registry is measured up to 5000 (bench.registry_scale)
MAX_SRC_DIR_BYTES = 256 * 2**20  # src_dir is zipped and shipped with every task; data belongs in HDFS

# Matched with fullmatch: `$` would also admit a trailing newline.
TYPE_NAME = re.compile(r"[a-z][a-z0-9_]*")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RESOURCE_FORM = re.compile(r"^(?:(?P<type>[^:\[\]]+?)(?:\[(?P<index>[^\]]*)\])?:)?(?P<value>.+)$")
MEMORY = re.compile(r"^\s*(?P<num>\d+(?:\.\d+)?(?:e\+?\d+)?)\s*(?P<unit>[KMGT]i?B?|[KMGT]|B)?\s*$", re.IGNORECASE)
_UNIT_MB = {"": 1, "B": 1 / 2**20, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def parse_memory_mb(text: str | int, field_name: str) -> int:
    """'2048' (MiB), '2 GiB', '512M', '1.5g' -> MiB; refuses zero, negatives and nonsense."""
    if isinstance(text, bool):
        raise UsageError(f"{field_name}: {text!r} is not a memory size; allowed: a positive number of MiB or e.g. '2 GiB'")
    if isinstance(text, (int, float)):
        text = repr(text) if isinstance(text, float) and math.isfinite(text) else str(text)
    if not isinstance(text, str):
        raise UsageError(f"{field_name}: {text!r} is not a memory size; allowed: a positive number of MiB or e.g. '2 GiB'")
    match = MEMORY.match(text)
    if not match:
        raise UsageError(f"{field_name}: {text!r} is not a memory size; allowed: a positive number of MiB or e.g. '2 GiB'")
    unit = (match["unit"] or "").upper()[:1]
    mb = int(float(match["num"]) * _UNIT_MB[unit])
    if mb <= 0:
        raise UsageError(f"{field_name}: {text!r} must be at least 1 MiB")
    return mb


def parse_count(text: str | int, field_name: str, minimum: int = 1, maximum: int | None = None) -> int:
    allowed = f"a whole number >= {minimum}" if maximum is None else f"a whole number from {minimum} to {maximum}"
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise UsageError(f"{field_name}: {text!r} is not a whole number; allowed: {allowed}")
    try:
        value = int(str(text).strip())
    except ValueError:
        raise UsageError(f"{field_name}: {text!r} is not a whole number; allowed: {allowed}") from None
    if value < minimum:
        raise UsageError(f"{field_name}: {value} is too small; allowed: {allowed}")
    if maximum is not None and value > maximum:
        shown = str(value) if len(str(value)) <= 12 else f"{str(value)[:12]}..."
        raise UsageError(f"{field_name}: {shown} is too large; allowed: at most {maximum}")
    return value


def parse_requirement(text: str) -> dict[str, int]:
    """'ps:1,worker:4' -> {'ps': 1, 'worker': 4} (order kept)."""
    field_name = "cluster_requirement"
    allowed = "'<type>:<count>,...' such as 'ps:1,worker:2'"
    if not text or not text.strip():
        raise UsageError(f"{field_name}: is empty; allowed: {allowed}")
    result: dict[str, int] = {}
    for part in text.split(","):
        name, sep, count = part.strip().partition(":")
        if not sep or not name.strip() or not count.strip():
            raise UsageError(f"{field_name}: {part.strip()!r} is malformed; allowed: {allowed}")
        name = name.strip()
        check_type_name(name, field_name)
        if name in result:
            raise UsageError(f"{field_name}: type {name!r} is given twice; allowed: each type once")
        result[name] = parse_count(count, f"{field_name} ({name})", maximum=MAX_INSTANCES)
    return result


# The task types the frameworks and the roles know by name (TF_CONFIG's, torch's rank 0, the defaults of
# tracked/untracked/sidecar). A type one edit from one of these is a typo more often than a new type: `-r
# wrker:2` would run a "wrker" nobody tracks as a worker. `ps` is left out: every two-letter name is one edit
# from it.
KNOWN_TYPES = ("chief", "evaluator", "master", "tensorboard", "worker")


def check_type_name(name: str, field_name: str) -> None:
    if not TYPE_NAME.fullmatch(name):
        raise UsageError(f"{field_name}: {name!r} is not a valid type name; "
                         "allowed: lower-case letters, digits and '_', starting with a letter")
    near = next((known for known in KNOWN_TYPES if one_edit_apart(name, known)), None)
    if near:
        raise UsageError(f"{field_name}: type {name!r} is one letter from {near!r}; did you mean {near}? "
                         f"allowed: {near}, or a name further from {', '.join(KNOWN_TYPES)}")


def one_edit_apart(a: str, b: str) -> bool:
    """a != b, and one letter inserted, removed, changed, or two neighbours swapped turns a into b."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = sorted((a, b), key=len)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known name a mistyped one most likely meant (difflib's ratio >= 0.75), or None."""
    found = difflib.get_close_matches(word, list(known), n=1, cutoff=0.75)
    return found[0] if found else None


def unknown_name(field_name: str, what: str, word: str, known: Iterable[str]) -> UsageError:
    """The refusal of an unknown key: the closest known one when there is one, else every known one."""
    names = sorted(known)
    match = closest(word, names)
    if match:
        return UsageError(f"{field_name}: unknown {what} {word!r}; did you mean {match!r}? allowed: {match}, or "
                          "another of the reference's keys")
    return UsageError(f"{field_name}: unknown {what} {word!r}; allowed: {', '.join(names)}")


@dataclass
class ResourceForms:
    """The three forms of one resource (docs/submitting.md): general, per type, per task."""

    general: Any = None
    per_type: dict[str, Any] = field(default_factory=dict)
    per_task: dict[tuple[str, int], Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, values: Any, field_name: str, parse_value: Callable[[str, str], Any]) -> ResourceForms:
        """`values`: one form or a list of them, from an option (str) or a job file (also numbers)."""
        forms = cls()
        if values is None:
            return forms
        if isinstance(values, (str, int, float)):
            values = [values]
        if not isinstance(values, (list, tuple)):
            raise UsageError(f"{field_name}: {values!r} is malformed; allowed: '<value>', '<type>:<value>', "
                             "'<type>[<index>]:<value>' or a list of those")
        for raw in values:
            if isinstance(raw, float):
                raw = repr(raw)
            if not isinstance(raw, (str, int)) or isinstance(raw, bool):
                raise UsageError(f"{field_name}: {raw!r} is malformed; allowed: '<value>', "
                                 "'<type>:<value>' or '<type>[<index>]:<value>'")
            for item in (str(raw).split(",") if not isinstance(raw, int) else [raw]):
                item = str(item).strip()
                match = RESOURCE_FORM.match(item) if item else None
                if not match:
                    raise UsageError(f"{field_name}: {raw!r} is malformed; allowed: '<value>', "
                                     "'<type>:<value>' or '<type>[<index>]:<value>'")
                value = parse_value(match["value"], field_name)
                if match["type"] is None:
                    forms.general = value
                    continue
                type_name = match["type"].strip()
                check_type_name(type_name, field_name)
                if match["index"] is None:
                    forms.per_type[type_name] = value
                else:
                    index = parse_count(match["index"], f"{field_name} ({type_name} index)", minimum=0)
                    forms.per_task[(type_name, index)] = value
        return forms

    def check_against(self, instances: Mapping[str, int], field_name: str) -> None:
        for type_name in list(self.per_type) + [t for t, _ in self.per_task]:
            if type_name not in instances:
                raise UsageError(f"{field_name}: names unknown type {type_name!r}; "
                                 f"allowed: {', '.join(instances)}")
        for (type_name, index), _ in self.per_task.items():
            if index >= instances[type_name]:
                raise UsageError(f"{field_name}: {type_name}[{index}] is out of range; "
                                 f"{type_name} has indexes 0..{instances[type_name] - 1}")

    def for_type(self, type_name: str, own: Any, default: Any) -> Any:
        """One rule for memory, vcores, GPUs and labels: a per-type option (`-m worker:4096`) beats the
        type's own `tasks:` entry (`own`, None if absent), which beats a general option (`-m 2048`),
        which beats the default. Per-task forms are applied on top (TaskSpec.*_by_index)."""
        if type_name in self.per_type:
            return self.per_type[type_name]
        if own is not None:
            return own
        return self.general if self.general is not None else default


def _is_root(path: str) -> bool:
    """`hdfs://`, `hdfs:///`, `hdfs://nn:8020/`, `/`: a whole filesystem."""
    if path.startswith("hdfs:"):
        rest = path[len("hdfs:"):]
        if rest.startswith("//"):
            rest = rest[2:]
            rest = rest[rest.find("/"):] if "/" in rest else ""
        return rest.strip("/") == ""
    if path.startswith("file://"):
        return path[len("file://"):].strip("/") == ""
    return path.strip() != "" and path.strip().strip("/") == ""


# The engines' grammar for an image reference (github.com/distribution/reference, reference.go):
# [domain[:port]/]path-component[/path-component...][:tag][@digest], path components lower case.
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9A-Fa-f:]+\])(?::[0-9]+)?"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_REFERENCE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_PART}(?:/{_PATH_PART})*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?")
IMAGE_NAME_MAX = 255


def check_image_reference(value: str, field_name: str = "docker_image") -> None:
    """An image reference as Docker and podman read it (`debian:bookworm`, `registry:5000/ml/tf:2.21`,
    `…@sha256:<hex>`): anything else would only fail on a node, after the job was submitted."""
    allowed = ("allowed: an image reference such as debian:bookworm or registry.example:5000/ml/tensorflow:2.21 "
               "(lower-case repository, optional registry host and port, tag or digest)")
    if not value.strip():
        raise UsageError(f"{field_name}: is empty; {allowed}")
    match = IMAGE_REFERENCE.fullmatch(value)
    if match is None:
        raise UsageError(f"{field_name}: {value!r} is not an image reference; {allowed}")
    if len(match.group("name")) > IMAGE_NAME_MAX:
        raise UsageError(f"{field_name}: the repository name is longer than {IMAGE_NAME_MAX} characters; {allowed}")


DOCKER_RUNTIMES = ("engine", "yarn")  # the executor runs the engine / YARN's Docker runtime does
DOCKER_ENGINES = ("docker", "podman")
_MOUNT_PATH = re.compile(r"/[^:,\s]*")
_DOCKER_USER = re.compile(r"[0-9]+:[0-9]+")


def parse_docker_images(values: Any, type_names: Sequence[str]) -> tuple[str, dict[str, str]]:
    """`--docker-image IMAGE` and `--docker-image TYPE:IMAGE` (repeatable): the job's image and the types' own.
    A prefix before the first ':' that names one of the job's types is a type (`worker:tf:2.21`);
    anything else is one image reference (`registry:5000/tf`)."""
    if values is None:
        return "", {}
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, str) for v in values):
        raise UsageError(f"docker_image: {values!r} is malformed; allowed: 'IMAGE' or 'TYPE:IMAGE', or a list of those")
    general, per_type = "", {}
    for raw in values:
        head, sep, rest = raw.partition(":")
        if sep and head in type_names:
            check_image_reference(rest, f"docker_image ({head})")
            per_type[head] = rest
        else:
            check_image_reference(raw)
            general = raw
    return general, per_type


def parse_mount(value: Any, field_name: str = "docker_mounts") -> str:
    """`SRC:DST[:ro|rw]`, both absolute paths on the node: what the engine bind-mounts (default read-write)."""
    allowed = "allowed: SRC:DST, SRC:DST:ro or SRC:DST:rw with absolute paths (no ',' or ':' in them)"
    parts = str(value).split(":") if isinstance(value, str) else []
    mode = parts.pop() if len(parts) == 3 else "rw"
    if len(parts) != 2 or mode not in ("ro", "rw") or not all(_MOUNT_PATH.fullmatch(p) for p in parts):
        raise UsageError(f"{field_name}: {value!r} is malformed; {allowed}")
    return f"{parts[0]}:{parts[1]}:{mode}"


def check_docker_choice(value: str, field_name: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise UsageError(f"{field_name}: {value!r} is not known; allowed: {', '.join(allowed)}")
    return value


def check_docker_user(value: str) -> str:
    """Numbers only: the engine resolves a name in the image's own /etc/passwd (where it may be uid 0, whatever
    it is on the submitting host or the node) and runs a bare uid with gid 0, so neither can be checked
    against the node admin's rules (core/executor/admin_rules.py) as what the container will run as."""
    if value and not _DOCKER_USER.fullmatch(value):
        raise UsageError(f"docker_user: {value!r} is not UID:GID; allowed: two numbers, such as 1000:1000 (a name "
                         "or a bare uid is resolved in the image, where it can be root or root's group)")
    return value


def check_data_path(path: str, field_name: str) -> None:
    """An input or output is a directory, never a filesystem's root (tasks copy all of it)."""
    if path and _is_root(path):
        raise UsageError(f"{field_name}: {path!r} is the root of the filesystem; allowed: a directory below it, "
                         "such as hdfs:///data/run1")


def check_src_dir(src_dir: str) -> None:
    if not Path(src_dir).is_dir():
        raise UsageError(f"src_dir: {src_dir} does not exist or is not a directory")
    total = 0
    for root, _dirs, files in os.walk(src_dir):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
            if total > MAX_SRC_DIR_BYTES:
                break
    if total > MAX_SRC_DIR_BYTES:
        raise UsageError(f"src_dir: {src_dir} holds {size_text(total)} or more; allowed: at most "
                         f"{MAX_SRC_DIR_BYTES // 2**20} MiB (it is zipped and shipped with every task: put data "
                         "in HDFS and pass it with -i)")


def check_packed_env(path: str) -> None:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"python_venv: {path} does not exist or is not a file")
    is_archive = zipfile.is_zipfile(p) if path.endswith(".zip") else tarfile.is_tarfile(p)
    if not is_archive:
        raise UsageError(f"python_venv: {path} is not a .tar.gz, .tgz or .zip archive; allowed: a packed "
                         "environment made by venv-pack")


def size_text(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def check_history_dir(text: str, field_name: str) -> str:
    """Refuse a history root that is not absolute (a relative HDFS path would depend on the user)
    or that is a filesystem's root (the store would write there)."""
    if text and not text.startswith(("/", "hdfs://", "file:///")):
        raise UsageError(f"{field_name}: {text!r} is not an absolute path; allowed: /path or hdfs://... "
                         "(HDFS) or file:///path (one machine)")
    if text and _is_root(text):
        raise UsageError(f"{field_name}: {text!r} is the root of the filesystem; allowed: a directory below it, "
                         "such as /tmp/tony-history")
    return text


def parse_seconds(value: Any, field_name: str, positive: bool = False) -> float:
    if isinstance(value, bool):
        raise UsageError(f"{field_name}: {value!r} is not a number of seconds")
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{field_name}: {value!r} is not a number of seconds") from None
    if not math.isfinite(seconds):
        raise UsageError(f"{field_name}: {value!r} is not a finite number; allowed: seconds >= 0 (0 = no limit)")
    if seconds < 0 or (positive and seconds == 0):
        raise UsageError(f"{field_name}: {value!r} must be {'> 0' if positive else '>= 0'} seconds")
    return seconds


def parse_env_pairs(pairs: Iterable[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        key, sep, value = str(pair).partition("=")
        if not sep or not key:
            raise UsageError(f"env: {pair!r} is malformed; allowed: KEY=VALUE")
        if not ENV_NAME.fullmatch(key):
            raise UsageError(f"env: {key!r} is not a variable name; allowed: letters, digits and '_'")
        env[key] = value
    return env
