"""The one error tree every entry point maps onto the exit codes (docs/ARCHITECTURE.md, docs/submitting.md, "exit codes").

An expected failure is a `TonyError` whose message is one line; `exit_code` says
what the command line exits with. Failures of the libraries at our boundaries
(skein's driver, httpx, subprocesses) are turned into these where they happen,
and `one_line` makes a last-resort line of any that slip through.
"""

from __future__ import annotations


class TonyError(Exception):
    """An expected failure, told in one line."""

    exit_code = 1


class UsageError(TonyError, ValueError):
    """Bad input, refused before anything was submitted (exit code 2).

    The message is one line that names the field and what is allowed.
    """

    exit_code = 2


class ClusterError(TonyError, RuntimeError):
    """The cluster (local or real) could not be started or used (exit code 1)."""

    exit_code = 1


# sysexits.h's EX_UNAVAILABLE ("a service is unavailable"): a scheduler or script can tell "no cluster
# answered, nothing was done there" from a job that FAILED (1) and from bad input (2).
CLUSTER_UNREACHABLE_EXIT = 69


class ClusterUnreachable(ClusterError):
    """No ResourceManager answered at all (refused, unreachable, or only standbys): not a job's failure,
    nothing was done on the cluster (exit code 69). The message names the addresses and where they came from."""

    exit_code = CLUSTER_UNREACHABLE_EXIT


# Libraries whose exceptions are expected at our boundaries (a driver JVM that does not
# start, an unreachable NameNode): a command line turns them into one line, not a traceback.
BOUNDARY_MODULES = ("skein", "httpx", "httpcore", "aiohttp", "fsspec", "requests", "subprocess")


def is_boundary_error(exc: BaseException) -> bool:
    module = type(exc).__module__ or ""
    return isinstance(exc, (TonyError, OSError)) or module.split(".")[0] in BOUNDARY_MODULES


def one_line(exc: BaseException) -> str:
    """The message of an error on one line, with the library it came from when it is not ours."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, TonyError):
        return text
    return f"{type(exc).__module__.split('.')[0]}: {type(exc).__name__}: {text}"[:1000]
