"""What every command line shares: argparse that refuses in one line, and one mapping of
errors onto exit codes (0 success, 1 failure, 2 bad input, 69 no cluster reached; docs/submitting.md, "exit codes")."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from tony_airflow.errors import TonyError, UsageError, is_boundary_error, one_line
from tony_airflow.yarn.rest import is_application_id


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports bad input as one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def err(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def check_app_id(app_id: str) -> str:
    if not is_application_id(app_id):
        raise UsageError(f"application_id: {app_id!r} is malformed; allowed: application_<cluster ts>_<seq>")
    return app_id


def run(argv: Sequence[str] | None, parser_factory: Callable[[], argparse.ArgumentParser]) -> int:
    """Parse and dispatch; map errors onto exit codes with one line on stderr."""
    try:
        args = parser_factory().parse_args(argv)
        return args.func(args)
    except TonyError as exc:
        err(f"error: {one_line(exc)}")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a library failing at our boundary (skein's driver, httpx): one line, exit 1
        if not is_boundary_error(exc):
            raise
        err(f"error: {one_line(exc)}")
        return 1
