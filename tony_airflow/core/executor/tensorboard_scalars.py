"""Progress with no code at all (issue #52): the newest scalars of the TensorBoard event files the program
writes into its output, read with TensorBoard's own event reader, only when TensorBoard is installed.

The executor's relay asks `TensorBoardScalars.latest()` (at most every READ_EVERY_S) only while the program
has reported nothing itself (core/executor/status_channel.py). Each event file is read from where the last
look left off (EventFileLoader keeps its offset; a record still being written is read next time). Keras's
`TensorBoard` callback writes `epoch_loss` in `train/`: shown as `loss`; other runs' tags keep their run
(`validation/epoch_loss` -> `validation/loss`).
"""

from __future__ import annotations

import logging
import sys
import time
import types
from pathlib import Path
from typing import Any

from tony_airflow.progress import MAX_METRICS

log = logging.getLogger("tony.executor.tensorboard")
READ_EVERY_S = 5.0
MAX_FILES = 64  # event files followed at once (the newest)


def available() -> bool:
    """Whether TensorBoard's reader can be imported here (asked once, at the first look: not at start-up).

    TensorBoard's own stub of TensorFlow reads the files (`tensorboard.compat.notf`, TensorBoard's switch for
    it): TensorFlow itself would take seconds and hundreds of MiB of the container's memory in the executor."""
    sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))
    try:
        import tensorboard.backend.event_processing.event_file_loader  # noqa: F401
        import tensorboard.util.tensor_util  # noqa: F401
    except Exception:
        return False
    return True


class TensorBoardScalars:
    def __init__(self, root: Path, clock=time.monotonic):
        self.root = root
        self.clock = clock
        self._loaders: dict[Path, Any] = {}
        self._next = 0.0
        self._step: int | None = None
        self._metrics: dict[str, float] = {}
        self._changed = False
        self._available: bool | None = None

    def latest(self) -> dict[str, Any] | None:
        """A report (`step`, `metrics`) when the event files hold new scalars since the last call, else None."""
        now = self.clock()
        if now < self._next:
            return None
        self._next = now + READ_EVERY_S
        if self._available is None:
            self._available = available()
            if not self._available:
                log.info("TensorBoard is not installed: no progress from event files")
        if not self._available:
            return None
        for path in self._event_files():
            self._read(path)
        if not self._changed:
            return None
        self._changed = False
        return {"step": self._step, "metrics": dict(self._metrics)}

    def _event_files(self) -> list[Path]:
        try:
            found = [p for p in self.root.rglob("*tfevents*") if p.is_file() and ".tony-snapshots" not in p.parts]
        except OSError:
            return []
        found.sort(key=lambda p: p.stat().st_mtime if p.exists() else 0)
        return found[-MAX_FILES:]

    def _read(self, path: Path) -> None:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
        from tensorboard.util import tensor_util

        loader = self._loaders.get(path)
        if loader is None:
            loader = self._loaders[path] = EventFileLoader(str(path))
        run = path.parent.relative_to(self.root).as_posix()
        run = "" if run in (".", "train") or run.endswith("/train") else run.rsplit("/", 1)[-1]
        for event in loader.Load():
            if not event.HasField("summary"):
                continue
            for value in event.summary.value:
                number = None
                if value.HasField("simple_value"):
                    number = float(value.simple_value)
                elif value.HasField("tensor"):
                    try:
                        array = tensor_util.make_ndarray(value.tensor)
                        if array.size == 1 and array.dtype.kind in "fiu":
                            number = float(array.reshape(()))
                    except Exception:
                        continue
                if number is None:
                    continue
                tag = value.tag[len("epoch_"):] if value.tag.startswith("epoch_") else value.tag
                name = f"{run}/{tag}" if run else tag
                if name in self._metrics or len(self._metrics) < MAX_METRICS:
                    self._metrics[name] = number
                    self._changed = True
                if run == "" and event.step >= 0:
                    self._step = max(self._step or 0, int(event.step))
