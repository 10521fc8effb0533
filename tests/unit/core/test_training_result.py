"""Issue #52 item 3: a job's final training numbers from its history, and as flat output properties."""

from __future__ import annotations

from tony_airflow.core.training_result import (
    MAX_METRIC_PROPERTIES,
    final_training,
    last_training,
    output_properties,
    read_final_training,
)

T1 = {"event": "TRAINING", "attempt": 1, "ts": 1.0, "task": "worker:0", "step": 10, "total_steps": 40,
      "epoch": None, "total_epochs": None, "percent": 25.0, "eta_s": 30.0, "metrics": {"loss": 0.9},
      "updated": 1.0, "source": "report"}
T2 = {**T1, "attempt": 2, "step": 40, "percent": 100.0, "eta_s": 0.0, "metrics": {"loss": 0.21, "accuracy": 0.93},
      "updated": 9.0}


def test_the_last_training_event_wins_and_a_job_without_reports_has_none():
    events = [{"event": "JOB_STARTED"}, T1, {"event": "TASK_FINISHED"}, T2, {"event": "JOB_FINISHED"}]
    last = last_training(events)
    assert last is not None and last["step"] == 40 and last["attempt"] == 2
    assert last["metrics"] == {"loss": 0.21, "accuracy": 0.93} and "eta_s" not in last and "event" not in last
    assert last_training([{"event": "JOB_STARTED"}, {"event": "JOB_FINISHED"}]) is None


def test_the_final_numbers_name_their_application():
    final = final_training("application_1_0001", last_training([T2]))
    assert final == {"application_id": "application_1_0001", "task": "worker:0", "step": 40, "total_steps": 40,
                     "epoch": None, "total_epochs": None, "percent": 100.0,
                     "metrics": {"loss": 0.21, "accuracy": 0.93}, "source": "report"}
    assert final_training("application_1_0001", None) is None


def test_output_properties_are_flat_strings_and_bounded():
    props = output_properties(last_training([T2]))
    assert props == {"training_step": "40", "training_total_steps": "40", "training_percent": "100.0",
                     "metric_accuracy": "0.93", "metric_loss": "0.21"}
    many = {**T2, "metrics": {f"m{i:02d} odd/name": float(i) for i in range(40)}}
    props = output_properties(many)
    metrics = [k for k in props if k.startswith("metric_")]
    assert len(metrics) == MAX_METRIC_PROPERTIES and "metric_m00_odd_name" in props
    assert output_properties(None) == {}


def test_reading_a_history_never_raises():
    class Broken:
        def find(self, app_id):
            raise OSError("HDFS is away")

    class Empty:
        def find(self, app_id):
            return None

    assert read_final_training("application_1_0001", Broken()) is None
    assert read_final_training("application_1_0001", Empty()) is None
