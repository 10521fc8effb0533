"""The command lines: thin adapters that parse arguments, call the core, and exit 0, 1 or 2.

- `tony` (tony.py): the local cluster, submit, status, kill, history, logs, oozie workflow
- `ytf-submit` (submit.py): the submitter (README, "Submitting a job")
- `tony-azkaban` (azkaban.py), `tony-oozie` (oozie.py): the workflow engines' entry points
- `python -m tony_airflow.cli.dag_test` (dag_test.py): one DAG file through Airflow's `dag.test()`

common.py holds what they share: the one-line parser and the error-to-exit-code runner.
Nothing outside this package imports it.
"""

import sys
import warnings
from pathlib import Path

COMMANDS = frozenset({"tony", "ytf-submit", "tony-azkaban", "tony-oozie"})  # pyproject's scripts
# Imported by libraries on the way, used by no command: httpx's own command line (click, rich, pygments:
# 0.05 s) and trio, an async backend httpcore offers (0.12 s) where our commands make blocking calls.
UNUSED_BY_COMMANDS = ("httpx._main", "trio")


def lean_imports() -> None:
    """Import only what a command needs (issue #41: its start is on every job's path).

    - skein imports `distutils.version` (its LooseVersion), which setuptools' shim
      (distutils-precedence.pth) answers with all of setuptools and pkg_resources: 0.15 s. Python 3.11's
      own distutils has the same class; the shim stays for any later import. Python 3.12 has no
      distutils of its own: there the shim's answer is the only one.
    - UNUSED_BY_COMMANDS are refused, as if not installed: their importers carry on without them.
    Only in a command's own process: a host process (Airflow, pytest) keeps what it imports.
    """
    for name in UNUSED_BY_COMMANDS:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    hack = sys.modules.get("_distutils_hack")
    if sys.version_info >= (3, 12) or hack is None or "distutils" in sys.modules:
        return
    hack.remove_shim()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "distutils ... slated for removal in 3.12"
            import distutils.version  # noqa: F401
    except ImportError:
        pass  # a Python built without it: skein's import takes the shim's as before
    finally:
        hack.add_shim()


if Path(sys.argv[0]).name in COMMANDS:
    lean_imports()
