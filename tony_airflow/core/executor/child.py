"""Running the user's command in its own process group, with its stderr tail kept.

The group's first process is the guard (core/executor/guard.py): whatever kills
the executor, the group dies with it. stdout and stderr are copied chunk by
chunk to the container's log (the executor's own stdout and stderr) and handed
to `on_output` (the live output, core/output.py); stderr's last lines are kept
for the AM's failure diagnostics. Nothing is buffered without bound: a 50 MB
line with no newline costs one 64 KiB chunk and a tail of TAIL_CHARS characters.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from tony_airflow.core.executor import guard

CHUNK_BYTES = 64 * 1024
TAIL_CHARS = 8000  # what the AM keeps (4000) with room for multi-byte characters
GUARD = Path(guard.__file__)


class UserProcess:
    def __init__(self, command: str, env: dict[str, str], cwd: str | None = None, tail_lines: int = 40,
                 stderr_sink: BinaryIO | None = None, stdout_sink: BinaryIO | None = None,
                 on_output: Callable[[str, bytes], None] | None = None, argv: list[str] | None = None,
                 remove: tuple[str, str] | None = None):
        """`on_output(stream, chunk)` sees every chunk of both streams ("stdout"/"stderr"), as written.
        `argv` (a container engine's `run`, core/executor/engine.py) runs instead of `bash -c command`; its
        stdin is a pipe this process holds open until it ends: the container's lease on its executor.
        `remove` (engine, container name): the guard removes that container if the client is killed or the
        executor goes (a container created but never started has no lease of its own)."""
        lease, self._lease = os.pipe()  # the guard's lease: this process alone holds the write end
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(GUARD), str(lease), *(["--remove", *remove] if remove else []),
                 *(argv or ["bash", "-c", command])],
                env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                stdin=subprocess.PIPE if argv else subprocess.DEVNULL, process_group=0, pass_fds=(lease,),
            )
        except BaseException:
            os.close(self._lease)
            raise
        finally:
            os.close(lease)
        self.tail_lines = tail_lines
        self._tail = bytearray()
        self.max_buffered = 0  # the most this process held of the stderr stream at once (tests bound it)
        self._on_output = on_output
        sinks = {"stdout": stdout_sink if stdout_sink is not None else sys.stdout.buffer,
                 "stderr": stderr_sink if stderr_sink is not None else sys.stderr.buffer}
        self._pumps = [threading.Thread(target=self._copy, args=(name, sink), name=name, daemon=True)
                       for name, sink in sinks.items()]
        for pump in self._pumps:
            pump.start()

    def _copy(self, stream: str, sink: BinaryIO) -> None:
        pipe = self.proc.stdout if stream == "stdout" else self.proc.stderr
        assert pipe is not None
        fd = pipe.fileno()
        while True:
            chunk = os.read(fd, CHUNK_BYTES)
            if not chunk:
                break
            try:
                sink.write(chunk)
                sink.flush()
            except (OSError, ValueError):  # the container log went away: keep the tail all the same
                pass
            if self._on_output is not None:
                try:
                    self._on_output(stream, chunk)
                except Exception:  # the live output is a convenience; the command's log is what counts
                    pass
            if stream == "stdout":
                continue
            self._tail += chunk
            self.max_buffered = max(self.max_buffered, len(self._tail))
            if len(self._tail) > 2 * TAIL_CHARS:
                del self._tail[:-TAIL_CHARS]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait(self) -> int:
        code = self.proc.wait()
        for pump in self._pumps:
            pump.join(timeout=5)
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
        if self._lease >= 0:
            os.close(self._lease)
            self._lease = -1

    def stderr_tail(self) -> str:
        """The last lines of stderr, at most TAIL_CHARS characters."""
        text = bytes(self._tail[-TAIL_CHARS:]).decode(errors="replace").rstrip("\n")
        return "\n".join(text.splitlines()[-self.tail_lines:])[-TAIL_CHARS:]
