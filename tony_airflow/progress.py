"""A training program's progress, reported to its job: `report(step=, total_steps=, epoch=, total_epochs=,
metrics={...})`, and callbacks for Keras and for Lightning/HuggingFace-style trainers that call it.

Standard library only, on purpose: the executor ships this file into every task as `tony_progress.py` on
the command's PYTHONPATH (core/executor/status_channel.py), so a program in an image without tony-airflow
imports it too. Where tony-airflow is installed it is also `tony_airflow.progress`.

It never fails or slows the training: `report` only stores the newest report and wakes a sender thread
(microseconds); the thread sends at most one report per MIN_INTERVAL_S to the executor's loopback endpoint
(TONY_STATUS_URL, with TONY_STATUS_TOKEN) and drops the reports made in between (the newest wins, nothing
queues). A report that cannot be sent is dropped. Outside a tony-airflow task (no TONY_STATUS_URL) every
call does nothing. The last report is sent at the program's exit (at most EXIT_WAIT_S).

The rules a report must follow (`clean_report`) are also the executor's and the AM's, which check them again.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import threading
import time
import urllib.request
from typing import Any

ENV_URL = "TONY_STATUS_URL"
ENV_TOKEN = "TONY_STATUS_TOKEN"
TOKEN_HEADER = "X-Tony-Status-Token"
MAX_BODY = 64 * 1024          # bytes of one report, as sent
MAX_METRICS = 32              # metrics in one report (the rest are left out)
MAX_NAME = 64                 # characters of a metric's name
MIN_INTERVAL_S = 0.5          # the sender sends at most this often; reports in between are dropped
SEND_TIMEOUT_S = 2.0          # one send (loopback; a stuck endpoint costs the sender thread, never the program)
EXIT_WAIT_S = 1.0             # at the program's exit, the last report waits this long at most
COUNT_FIELDS = ("step", "total_steps", "epoch", "total_epochs")
REFUSAL_KINDS = ("bad_token", "bad_json", "too_large", "flood", "bad_report")  # what the endpoint and the AM count


class BadReport(ValueError):
    """A report that breaks the rules, with the field named."""


def clean_report(data: object) -> dict[str, Any]:
    """The report as the AM keeps it: `step`, `total_steps`, `epoch`, `total_epochs` (whole numbers >= 0, or
    None) and `metrics` (name -> finite number; at most MAX_METRICS, names at most MAX_NAME characters; other
    values are left out). Raises BadReport for what cannot be a report (not an object, a count that is not
    a whole number >= 0, metrics that are not an object)."""
    if not isinstance(data, dict):
        raise BadReport(f"a report is a JSON object, not {type(data).__name__}")
    clean: dict[str, Any] = {}
    for name in COUNT_FIELDS:
        value = data.get(name)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise BadReport(f"{name}: a whole number >= 0 or null, not {value!r}"[:200])
        clean[name] = value
    metrics = data.get("metrics") or {}
    if not isinstance(metrics, dict):
        raise BadReport("metrics: an object of name -> number")
    kept: dict[str, float] = {}
    for key, value in metrics.items():
        if len(kept) >= MAX_METRICS:
            break
        number = _number(value)
        if isinstance(key, str) and 0 < len(key) <= MAX_NAME and number is not None:
            kept[key] = number
    clean["metrics"] = kept
    return clean


def _number(value: object) -> float | None:
    """A metric's value as a finite float (numpy and tensor scalars too), else None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


class _Sender:
    """The one thread that sends; `offer` never blocks."""

    def __init__(self, url: str, token: str):
        self.url, self.token = url, token
        self._lock = threading.Lock()
        self._pending: dict[str, Any] | None = None  # the newest report, as given: cleaned when it is sent
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._last_sent = 0.0
        self.sent = self.dropped = self.failed = 0
        self._thread = threading.Thread(target=self._run, name="tony-progress", daemon=True)
        self._thread.start()
        atexit.register(self.flush, EXIT_WAIT_S)

    def offer(self, data: dict[str, Any]) -> None:
        with self._lock:
            if self._pending is not None:
                self.dropped += 1  # the newer report replaces it: nothing queues
            self._pending = data
            self._idle.clear()
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            pause = self._last_sent + MIN_INTERVAL_S - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            with self._lock:
                data, self._pending = self._pending, None
            body = _body(data) if data is not None else None
            if body is not None:
                self._last_sent = time.monotonic()
                self._send(body)
            with self._lock:
                if self._pending is None:
                    self._idle.set()
                else:
                    self._wake.set()

    def _send(self, body: bytes) -> None:
        request = urllib.request.Request(self.url, data=body, method="POST", headers={
            "Content-Type": "application/json", TOKEN_HEADER: self.token})
        try:
            with urllib.request.urlopen(request, timeout=SEND_TIMEOUT_S) as answer:  # noqa: S310 (loopback)
                answer.read()
            self.sent += 1
        except Exception:  # refused (429 under a flood), gone, slow: the report is dropped
            self.failed += 1

    def flush(self, timeout: float) -> bool:
        """Wait (at most `timeout`) until the newest report was sent or tried."""
        return self._idle.wait(timeout)


_sender: _Sender | None = None
_sender_lock = threading.Lock()


def _the_sender() -> _Sender | None:
    global _sender
    if _sender is None:
        url, token = os.environ.get(ENV_URL), os.environ.get(ENV_TOKEN)
        if not url or not token:
            return None
        with _sender_lock:
            if _sender is None:
                _sender = _Sender(url, token)
    return _sender


def enabled() -> bool:
    """Whether reports go anywhere (the program runs as a tony-airflow task)."""
    return bool(os.environ.get(ENV_URL) and os.environ.get(ENV_TOKEN))


def _body(data: dict[str, Any]) -> bytes | None:
    """The report as sent (the sender's thread does this, 2 a second at most, not the training's)."""
    try:
        body = json.dumps(clean_report(data), separators=(",", ":")).encode()
    except Exception:
        return None
    return body if len(body) <= MAX_BODY else None


def _count_ok(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return False
    return isinstance(value, int) or float(value).is_integer()


def report(step: int | None = None, total_steps: int | None = None, epoch: int | None = None,
           total_epochs: int | None = None, metrics: dict[str, Any] | None = None) -> bool:
    """Report how far the training is: `epoch` counts from 1 (the epoch under way, or just finished);
    `metrics` maps names to numbers (the latest loss, accuracy, ...; a framework's scalar tensors too: they
    are read by the sender's thread, only for the reports it sends). Returns whether the report was taken
    (False outside a task, or when a count breaks the rules); never raises. Costs the caller a few
    microseconds: the report is cleaned and encoded by the sender, at most every MIN_INTERVAL_S."""
    try:
        sender = _the_sender()
        if sender is None:
            return False
        if not (_count_ok(step) and _count_ok(total_steps) and _count_ok(epoch) and _count_ok(total_epochs)):
            return False
        if metrics is not None and not isinstance(metrics, dict):
            return False
        sender.offer({"step": step, "total_steps": total_steps, "epoch": epoch, "total_epochs": total_epochs,
                      "metrics": dict(metrics) if metrics else {}})  # a copy: the program may change its dict
        return True
    except Exception:
        return False


def flush(timeout: float = EXIT_WAIT_S) -> bool:
    """Wait (at most `timeout` seconds) until the newest report was sent; True outside a task."""
    sender = _sender
    return sender.flush(timeout) if sender is not None else True


def _metrics_of(logs: object) -> dict[str, float]:
    if not isinstance(logs, dict):
        return {}
    return {str(k): v for k, v in ((k, _number(v)) for k, v in logs.items()) if v is not None}


class KerasCallback:
    """`model.fit(..., callbacks=[tony_progress.KerasCallback()])`: the step every MIN_INTERVAL_S while an
    epoch runs, and Keras's logs (loss, accuracy, ...) at every epoch's end. Duck-typed: Keras 2 (tf_keras)
    and Keras 3 call these methods on any object with them.

    No batch hooks, on purpose: one callback with a batch hook makes Keras call every callback's batch
    hooks, and BackupAndRestore's then back up and check for preemption after every step (a fifth of
    MultiWorkerMirroredStrategy's throughput here, bench.progress_cost). The step is read instead from the
    optimizer's `iterations` by a thread of this callback: a mirrored variable's own copy, no collective
    op (a metric's value would be one, so metrics wait for the epoch's end)."""

    def __init__(self) -> None:
        self.params: dict[str, Any] = {}
        self.model: Any = None
        self._epoch = 0
        self._metrics: dict[str, float] = {}
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    # Keras's Callback interface ----------------------------------------------------------------
    def set_params(self, params: dict[str, Any]) -> None:
        self.params = dict(params or {})

    def set_model(self, model: Any) -> None:
        self.model = model

    def _implements_train_batch_hooks(self) -> bool:
        return False

    def _implements_test_batch_hooks(self) -> bool:
        return False

    def _implements_predict_batch_hooks(self) -> bool:
        return False

    def _steps_per_epoch(self) -> int | None:
        steps = self.params.get("steps")
        return int(steps) if isinstance(steps, int) and steps > 0 else None

    def _total_steps(self) -> int | None:
        steps, epochs = self._steps_per_epoch(), self.params.get("epochs")
        return steps * int(epochs) if steps and isinstance(epochs, int) else None

    def _step(self) -> int | None:
        """Optimizer steps so far (a resumed run's restored ones too), or None where it cannot be read."""
        try:
            iterations = self.model.optimizer.iterations
            value = iterations.numpy() if hasattr(iterations, "numpy") else iterations
            number = _number(value)
            return int(number) if number is not None else None
        except Exception:
            return None

    def on_train_begin(self, logs: Any = None) -> None:
        if _the_sender() is None:
            return
        self._stop.clear()
        self._watcher = threading.Thread(target=self._watch, name="tony-progress-keras", daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        last = None
        while not self._stop.wait(MIN_INTERVAL_S):
            step = self._step()
            if step and step != last:  # news only (not the graph's tracing before the first step)
                last = step
                self._report(step)

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self._epoch = int(epoch)

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self._metrics = _metrics_of(logs) or self._metrics
        steps = self._steps_per_epoch()
        self._report((int(epoch) + 1) * steps if steps else self._step())

    def on_train_end(self, logs: Any = None) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=MIN_INTERVAL_S * 2)
            self._watcher = None
        flush()

    def _report(self, step: int | None) -> None:
        epochs = self.params.get("epochs")
        total = self._total_steps()
        report(step=min(step, total) if step is not None and total else step, total_steps=total,
               epoch=self._epoch + 1, total_epochs=int(epochs) if isinstance(epochs, int) else None,
               metrics=self._metrics)

    def __getattr__(self, name: str) -> Any:
        """Every other hook Keras calls (on_predict_begin, on_test_batch_end, ...) does nothing."""
        if name.startswith("on_"):
            return lambda *args, **kwargs: None
        raise AttributeError(name)


class TrainerCallback:
    """For PyTorch Lightning (`Trainer(callbacks=[tony_progress.TrainerCallback()])`) and HuggingFace
    (`Trainer(callbacks=[...])`): duck-typed, neither library is imported. A plain loop calls `step(...)`.

    Lightning calls `on_train_batch_end(trainer, module, outputs, batch, batch_idx)` and reads
    `trainer.global_step`, `trainer.max_steps`, `trainer.current_epoch`, `trainer.max_epochs`,
    `trainer.estimated_stepping_batches`, `trainer.callback_metrics`; HuggingFace calls
    `on_log(args, state, control, logs=...)` and `on_step_end(args, state, control)` with
    `state.global_step`, `state.max_steps`, `state.epoch`, `args.num_train_epochs`."""

    def __init__(self) -> None:
        self._metrics: dict[str, float] = {}

    # HuggingFace (transformers.TrainerCallback's hooks) ---------------------------------------
    def on_log(self, args: Any = None, state: Any = None, control: Any = None, logs: Any = None, **kw: Any) -> None:
        self._metrics.update(_metrics_of(logs))
        self._hf(args, state)

    def on_step_end(self, args: Any = None, state: Any = None, control: Any = None, **kw: Any) -> None:
        self._hf(args, state)

    def _hf(self, args: Any, state: Any) -> None:
        epoch = getattr(state, "epoch", None)
        total_epochs = getattr(args, "num_train_epochs", None)
        total = math.ceil(total_epochs) if isinstance(total_epochs, (int, float)) else None
        current = math.floor(epoch) + 1 if isinstance(epoch, (int, float)) else None
        if current is not None and total is not None:
            current = min(current, total)  # HuggingFace's last state.epoch is the total (3.0): epoch 3/3, not 4/3
        self.step(getattr(state, "global_step", None), getattr(state, "max_steps", None) or None, current, total)

    # Lightning ---------------------------------------------------------------------------------
    def on_train_batch_end(self, trainer: Any = None, pl_module: Any = None, *args: Any, **kw: Any) -> None:
        self._metrics.update(_metrics_of(dict(getattr(trainer, "callback_metrics", None) or {})))
        total = getattr(trainer, "max_steps", None)
        if not isinstance(total, int) or total <= 0:
            total = getattr(trainer, "estimated_stepping_batches", None)
        epochs = getattr(trainer, "max_epochs", None)
        epoch = getattr(trainer, "current_epoch", None)
        self.step(getattr(trainer, "global_step", None),
                  int(total) if isinstance(total, (int, float)) and math.isfinite(total) and total > 0 else None,
                  int(epoch) + 1 if isinstance(epoch, int) else None,
                  int(epochs) if isinstance(epochs, int) and epochs > 0 else None)

    def on_train_epoch_end(self, trainer: Any = None, pl_module: Any = None, *args: Any, **kw: Any) -> None:
        self.on_train_batch_end(trainer, pl_module)

    def on_train_end(self, *args: Any, **kw: Any) -> None:
        flush()

    # A plain loop ------------------------------------------------------------------------------
    def step(self, step: int | None, total_steps: int | None = None, epoch: int | None = None,
             total_epochs: int | None = None, **metrics: Any) -> None:
        self._metrics.update(_metrics_of(metrics))
        report(step=step, total_steps=total_steps, epoch=epoch, total_epochs=total_epochs, metrics=self._metrics)

    # What Lightning asks of any callback besides its hooks (its profiler names each hook call by
    # `state_key`; checkpoints carry `state_dict`): a review found `Trainer(callbacks=[TrainerCallback()])`
    # failing on them. Lightning's own type is LightningCallback's.
    @property
    def state_key(self) -> str:
        return type(self).__qualname__

    def setup(self, *args: Any, **kw: Any) -> None:
        pass

    def teardown(self, *args: Any, **kw: Any) -> None:
        pass

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state_dict: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        """Every other hook a trainer calls does nothing."""
        if name.startswith("on_"):
            return lambda *args, **kwargs: None
        raise AttributeError(name)


def LightningCallback() -> Any:  # noqa: N802 (used as a class: Trainer(callbacks=[LightningCallback()]))
    """A PyTorch Lightning `Callback` that reports as `TrainerCallback` does: a subclass of the installed
    Lightning's own (`lightning.pytorch`, else `pytorch_lightning`), made when called, since Lightning checks
    what its callbacks are; without Lightning, a `TrainerCallback`."""
    import importlib

    for name in ("lightning.pytorch", "pytorch_lightning"):
        try:
            Callback = importlib.import_module(name).Callback  # noqa: N806 (a class)
            break
        except (ImportError, AttributeError):
            continue
    else:
        return TrainerCallback()

    class Reporting(Callback):  # type: ignore[misc,valid-type]
        def __init__(self) -> None:
            super().__init__()
            self._tony = TrainerCallback()

        def on_train_batch_end(self, trainer: Any, pl_module: Any, *args: Any, **kw: Any) -> None:
            self._tony.on_train_batch_end(trainer, pl_module)

        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            self._tony.on_train_epoch_end(trainer, pl_module)

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            flush()

    return Reporting()
