"""Issue #52 item 2: with no code at all, the newest scalars of the program's TensorBoard event files,
read with TensorBoard's own reader, from where the last look left off."""

from __future__ import annotations

from pathlib import Path

import pytest

from tony_airflow.core.executor import tensorboard_scalars
from tony_airflow.core.executor.tensorboard_scalars import READ_EVERY_S, TensorBoardScalars

pytest.importorskip("tensorboard")


def _write(directory: Path, step: int, **scalars: float) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    writer = EventFileWriter(str(directory))
    values = [summary_pb2.Summary.Value(tag=tag, tensor=tensor_util.make_tensor_proto(value))
              for tag, value in scalars.items()]
    values.append(summary_pb2.Summary.Value(tag="legacy", simple_value=7.0))
    values.append(summary_pb2.Summary.Value(tag="histogram", tensor=tensor_util.make_tensor_proto([1.0, 2.0])))
    writer.add_event(event_pb2.Event(step=step, summary=summary_pb2.Summary(value=values)))
    writer.flush()
    writer.close()


def test_the_newest_scalars_of_the_event_files(tmp_path: Path):
    clock = [0.0]
    scalars = TensorBoardScalars(tmp_path, clock=lambda: clock[0])
    assert scalars.latest() is None  # nothing written yet
    _write(tmp_path / "tensorboard" / "train", 0, epoch_loss=2.0, epoch_accuracy=0.5)
    _write(tmp_path / "tensorboard" / "validation", 0, epoch_loss=2.5)
    clock[0] += READ_EVERY_S
    assert scalars.latest() == {"step": 0, "metrics": {"loss": 2.0, "accuracy": 0.5, "legacy": 7.0,
                                                       "validation/loss": 2.5, "validation/legacy": 7.0}}
    _write(tmp_path / "tensorboard" / "train", 3, epoch_loss=0.25)
    assert scalars.latest() is None  # looked at most every READ_EVERY_S
    clock[0] += READ_EVERY_S
    latest = scalars.latest()
    assert latest is not None and latest["step"] == 3 and latest["metrics"]["loss"] == 0.25
    clock[0] += READ_EVERY_S
    assert scalars.latest() is None  # nothing new


def test_without_tensorboard_nothing_is_read(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(tensorboard_scalars, "available", lambda: False)
    _write(tmp_path, 1, loss=1.0)
    assert TensorBoardScalars(tmp_path).latest() is None
