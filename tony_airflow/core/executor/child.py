"""Running the user's command in its own process group, with its stderr tail kept.

stdout goes straight to the container's log; stderr is copied there line by
line and its last lines are kept for the AM's failure diagnostics.
"""

from __future__ import annotations

import collections
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """If the executor is SIGKILLed, the child gets SIGKILL too (Linux prctl)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


class UserProcess:
    def __init__(self, command: str, env: dict[str, str], cwd: str | None = None, tail_lines: int = 40):
        self.proc = subprocess.Popen(
            ["bash", "-c", command], env=env, cwd=cwd, stdout=None, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL, process_group=0, preexec_fn=_die_with_parent,
        )
        self.tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
        self._pump = threading.Thread(target=self._copy_stderr, name="stderr", daemon=True)
        self._pump.start()

    def _copy_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in iter(self.proc.stderr.readline, b""):
            sys.stderr.buffer.write(raw)
            sys.stderr.flush()
            self.tail.append(raw.decode(errors="replace").rstrip("\n"))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait(self) -> int:
        code = self.proc.wait()
        self._pump.join(timeout=5)
        return code if code >= 0 else 128 - code  # killed by signal N -> 128+N, like a shell

    def stop(self, grace: float) -> None:
        """SIGTERM the whole process group, SIGKILL it after `grace` seconds."""
        if self.proc.poll() is not None:
            return
        pgid = self.proc.pid
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.1)
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def kill_group(self) -> None:
        """Whatever the command left running in its group does not outlive the task."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def stderr_tail(self) -> str:
        return "\n".join(self.tail)
