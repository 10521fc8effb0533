"""The executor ends with its YARN container, never after it.

skein runs a container's command as `bash -c "bash .skein.sh >log 2>&1"`: the redirection makes that
shell fork, so the container's process — the one the NodeManager watches — is the shell, and the
executor is its child. YARN's SIGTERM ends the shell at once; the NodeManager then counts the container
as ended, sends no SIGKILL (its process is gone) and removes the container's directory, while the
executor, which handles SIGTERM, goes on: its final push walked a directory being removed and took the
missing files for the program's deletions (the fresh-clone run's lost checkpoint). So the executor
asks the kernel for SIGKILL when its parent ends (prctl PR_SET_PDEATHSIG): it then ends before the
NodeManager can notice the container's end, let alone remove anything, and the guard's lease
(guard.py) takes the command's process group with it.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
from collections.abc import Mapping

log = logging.getLogger("tony.executor")
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def end_with_the_container(environ: Mapping[str, str]) -> bool:
    """In a YARN container (CONTAINER_ID) on Linux: SIGKILL this process when the container's process,
    its parent, ends. True when set; exits at once when the parent has already gone."""
    if not environ.get("CONTAINER_ID") or not sys.platform.startswith("linux"):
        return False
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    except (OSError, AttributeError) as exc:  # no prctl: YARN's own SIGKILL, 250 ms after its SIGTERM
        log.warning("cannot tie this executor to its container's process: %s", exc)
        return False
    if os.getppid() != parent:  # the container ended before the request took effect
        os._exit(128 + signal.SIGKILL)
    return True
