"""Import only what a process needs: its start is on every job's path (issue #41 item 4).

Called first by our own processes (the commands, the AM, the executor), never by a host process
(Airflow, pytest), which keeps what it imports.
"""

from __future__ import annotations

import sys
import warnings

# Imported by libraries on the way, used by none of our processes: httpx's own command line (click, rich,
# pygments: 0.05 s) and trio, an async backend httpcore offers (0.12 s) where we make blocking calls.
UNUSED = ("httpx._main", "trio")


def lean_imports() -> None:
    """- skein imports `distutils.version` (its LooseVersion), which setuptools' shim
      (distutils-precedence.pth) answers with all of setuptools and pkg_resources: 0.15 s. Python 3.11's
      own distutils has the same class; the shim stays for any later import. Python 3.12 has no
      distutils of its own: there the shim's answer is the only one.
    - UNUSED are refused, as if not installed: their importers carry on without them."""
    for name in UNUSED:
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
