"""Errors every entry point maps onto the exit codes of DESIGN §3.4."""

from __future__ import annotations


class UsageError(ValueError):
    """Bad input, refused before anything was submitted (exit code 2).

    The message is one line that names the field and what is allowed.
    """

    exit_code = 2


class ClusterError(RuntimeError):
    """The local cluster could not be started or reached."""

    exit_code = 1
