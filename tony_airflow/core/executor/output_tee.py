"""The command's output, teed: into a file YARN aggregates, and shipped to the AM about once a second.

Why both: the AM serves the live output through the tracking URL while the job
runs, and the aggregated file (`tony-output-<type>-<index>-a<attempt>.txt`)
holds every character after the AM is gone. Shipping never blocks the command:
it runs in its own thread, and what the AM cannot take in time is dropped from
memory (the file keeps it) and the AM is told where the output continues.
"""

from __future__ import annotations

import codecs
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from tony_airflow.core.output import EXECUTOR_KEEP_CHARS, SHIP_CHARS, OutputLog, output_file_name

log = logging.getLogger("tony.executor.output")
SHIP_EVERY_S = 1.0

Ship = Callable[[int, str], None]  # (offset, text): raises when the AM did not take it


def container_log_dir() -> Path | None:
    """The container's first log directory (YARN's LOG_DIRS); None outside a container."""
    dirs = [d for d in os.environ.get("LOG_DIRS", "").split(",") if d]
    return Path(dirs[0]) if dirs and Path(dirs[0]).is_dir() else None


class OutputTee:
    """Receives the command's chunks (both streams), keeps them as text, ships them to the AM."""

    def __init__(self, task_type: str, index: int, attempt: int, ship: Ship, log_dir: Path | None = None,
                 every: float = SHIP_EVERY_S, keep: int = EXECUTOR_KEEP_CHARS):
        self.output = OutputLog(keep)
        self._ship = ship
        self._every = every
        self._decoders = {s: codecs.getincrementaldecoder("utf-8")(errors="replace") for s in ("stdout", "stderr")}
        self._lock = threading.Lock()
        self.shipped = 0           # characters the AM has taken
        self.requests = 0          # pieces sent (tests bound it)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._file: TextIO | None = None
        if log_dir is not None:
            try:
                self._file = open(log_dir / output_file_name(task_type, index, attempt), "w", encoding="utf-8")
            except OSError as exc:
                log.warning("cannot keep the output in %s: %s", log_dir, exc)
        self._thread = threading.Thread(target=self._ship_loop, name="output", daemon=True)

    @property
    def has_file(self) -> bool:
        """Whether the output is kept in the container's log directory."""
        return self._file is not None

    def start(self) -> OutputTee:
        self._thread.start()
        return self

    def write(self, stream: str, chunk: bytes) -> None:
        """From the pumps of UserProcess (one thread per stream)."""
        with self._lock:
            text = self._decoders[stream].decode(chunk)
            if not text:
                return
            self.output.append(text)
            if self._file is not None:
                try:
                    self._file.write(text)
                    self._file.flush()
                except (OSError, ValueError):
                    self._file = None

    def close(self, timeout: float = 5.0) -> None:
        """The command ended: ship what is left (before the task reports its end), close the file."""
        with self._lock:
            for decoder in self._decoders.values():
                rest = decoder.decode(b"", final=True)
                if rest:
                    self.output.append(rest)
                    if self._file is not None:
                        self._file.write(rest)
            if self._file is not None:
                self._file.close()
                self._file = None
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)

    def _ship_loop(self) -> None:
        while True:
            stopping = self._stop.is_set()
            self._ship_pending(final=stopping)
            if stopping:
                return
            self._wake.wait(self._every)
            self._wake.clear()

    def _ship_pending(self, final: bool) -> None:
        while self.shipped < self.output.end:
            begin, text = self.output.read(self.shipped, SHIP_CHARS)
            try:
                self._ship(begin, text)
            except Exception as exc:  # the AM is busy or gone: try again on the next round
                if final:
                    log.warning("could not ship the last output to the AM: %s", exc)
                return
            finally:
                self.requests += 1
            self.shipped = begin + len(text)
