"""Issue #52 item 2: the callbacks of tony_progress, driven as Keras, Lightning and HuggingFace drive them
(duck-typed: none of those libraries is imported)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from tony_airflow import progress


@pytest.fixture
def reports(monkeypatch):
    calls: list[dict] = []
    monkeypatch.setattr(progress, "report", lambda **kw: calls.append(kw) or True)
    monkeypatch.setattr(progress, "flush", lambda timeout=1.0: True)
    return calls


def test_keras_steps_from_the_optimizer_between_epochs_and_logs_at_their_end(reports, monkeypatch):
    monkeypatch.setattr(progress, "_the_sender", lambda: object())  # as in a task
    monkeypatch.setattr(progress, "MIN_INTERVAL_S", 0.01)
    iterations = SimpleNamespace(value=15)
    iterations.numpy = lambda: iterations.value
    cb = progress.KerasCallback()
    cb.set_model(SimpleNamespace(optimizer=SimpleNamespace(iterations=iterations)))
    cb.set_params({"epochs": 3, "steps": 10, "verbose": 0})
    assert not cb._implements_train_batch_hooks()  # Keras would call every callback's batch hooks
    cb.on_train_begin()
    cb.on_epoch_begin(1)  # resumed at epoch 2 (BackupAndRestore): the optimizer restored 10 steps
    deadline = progress.time.monotonic() + 10
    while not reports and progress.time.monotonic() < deadline:
        progress.time.sleep(0.01)
    cb.on_epoch_end(1, {"loss": 0.8, "accuracy": 0.6})
    cb.on_test_batch_end(0, {})  # hooks it does not use do nothing
    cb.on_train_end()
    assert reports[0] == {"step": 15, "total_steps": 30, "epoch": 2, "total_epochs": 3, "metrics": {}}
    assert reports[-1] == {"step": 20, "total_steps": 30, "epoch": 2, "total_epochs": 3,
                           "metrics": {"loss": 0.8, "accuracy": 0.6}}
    count = len(reports)
    progress.time.sleep(0.05)
    assert len(reports) == count  # the thread ended with the training


def test_keras_without_steps_reports_epochs(reports):
    cb = progress.KerasCallback()
    cb.set_params({"epochs": 2, "steps": None})
    cb.on_train_begin()
    cb.on_epoch_begin(0)
    cb.on_epoch_end(0, {"loss": 0.5})
    assert reports == [{"step": None, "total_steps": None, "epoch": 1, "total_epochs": 2, "metrics": {"loss": 0.5}}]


def test_lightning_trainer(reports):
    cb = progress.TrainerCallback()
    trainer = SimpleNamespace(global_step=40, max_steps=-1, estimated_stepping_batches=200, current_epoch=1,
                              max_epochs=5, callback_metrics={"train_loss": 0.3, "note": "text"})
    cb.on_train_batch_end(trainer, object(), None, None, 3)
    cb.on_validation_end(trainer, object())  # not used: nothing
    assert reports == [{"step": 40, "total_steps": 200, "epoch": 2, "total_epochs": 5,
                        "metrics": {"train_loss": 0.3}}]


def test_lightning_gets_a_callback_of_its_own_type_and_what_it_asks_of_any(reports, monkeypatch):
    """A review: Lightning reads `state_key` and calls setup/teardown/state_dict on every callback, and checks
    their type; `TrainerCallback` raised AttributeError on the first. LightningCallback() is a subclass of the
    installed Lightning's Callback."""
    import types

    class Callback:  # Lightning's base, as far as this test needs it
        @property
        def state_key(self) -> str:
            return type(self).__qualname__

    lightning, pytorch = types.ModuleType("lightning"), types.ModuleType("lightning.pytorch")
    pytorch.Callback = Callback
    lightning.pytorch = pytorch
    monkeypatch.setitem(sys.modules, "lightning", lightning)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", pytorch)
    cb = progress.LightningCallback()
    assert isinstance(cb, Callback) and cb.state_key
    trainer = SimpleNamespace(global_step=5, max_steps=10, current_epoch=0, max_epochs=1, callback_metrics={})
    cb.on_train_batch_end(trainer, object(), None, None, 4)
    assert reports[-1]["step"] == 5 and reports[-1]["total_steps"] == 10
    plain = progress.TrainerCallback()
    assert plain.state_key == "TrainerCallback" and plain.state_dict() == {}
    plain.setup(trainer, object(), stage="fit")
    plain.teardown(trainer, object(), stage="fit")
    plain.load_state_dict({})


def test_huggingface_trainer(reports):
    cb = progress.TrainerCallback()
    args, state = SimpleNamespace(num_train_epochs=3.0), SimpleNamespace(global_step=10, max_steps=300, epoch=0.1)
    cb.on_log(args, state, None, logs={"loss": 2.0, "learning_rate": 5e-5, "epoch": 0.1})
    state.global_step = 11
    cb.on_step_end(args, state, None)
    assert reports[-1] == {"step": 11, "total_steps": 300, "epoch": 1, "total_epochs": 3,
                           "metrics": {"loss": 2.0, "learning_rate": 5e-5, "epoch": 0.1}}
    state.global_step, state.epoch = 300, 3.0  # the end: HuggingFace's epoch is the total
    cb.on_step_end(args, state, None)
    assert reports[-1]["epoch"] == 3


def test_the_callbacks_import_no_framework():
    import subprocess

    code = ("import sys, tony_airflow.progress as p; p.KerasCallback(); p.TrainerCallback(); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', 'keras', 'tf_keras', 'torch', "
            "'lightning', 'pytorch_lightning', 'transformers', 'numpy'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("bad", [{"step": -1}, {"epoch": 1.5}, {"total_steps": True}, {"metrics": [1]}, [1], "x"])
def test_clean_report_refuses_what_cannot_be_a_report(bad):
    with pytest.raises(progress.BadReport):
        progress.clean_report(bad)


def test_clean_report_keeps_numbers_only_and_at_most_32():
    metrics = {f"m{i}": i for i in range(40)} | {"s": "1.5x", "n": float("nan"), "": 1.0}
    clean = progress.clean_report({"step": 3.0, "metrics": metrics})
    assert clean["step"] == 3 and len(clean["metrics"]) == progress.MAX_METRICS
    assert "s" not in clean["metrics"] and "n" not in clean["metrics"]
