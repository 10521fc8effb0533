"""Issue #54 item 1: the launch bench cuts a run into phases that add up to the client's wall time."""

from __future__ import annotations

import pytest

from bench import launch_latency, launch_timeline


def _events(t: float) -> list[dict]:
    return [{"time": t + 0.1, "event": "JOB_SUBMITTED"}, {"time": t + 3.0, "event": "AM_STARTED"},
            {"time": t + 3.5, "event": "TASK_ALLOCATED", "task": "ps:0"},
            {"time": t + 3.6, "event": "TASK_ALLOCATED", "task": "worker:1"},
            {"time": t + 4.2, "event": "TASK_REGISTERED", "task": "worker:0"},
            {"time": t + 4.5, "event": "TASK_FINISHED", "task": "worker:0"},
            {"time": t + 4.6, "event": "TASK_FINISHED", "task": "worker:1"},
            {"time": t + 5.5, "event": "TASK_FINISHED", "task": "ps:0"},
            {"time": t + 5.6, "event": "JOB_FINISHED"}]


def test_the_phases_follow_the_witnesses_and_add_up_to_the_wall_time():
    t0 = 1_000.0
    app = {"startedTime": 1_000_500, "launchTime": 1_001_000, "finishedTime": 1_006_000}
    got = launch_timeline.phases(t0, 7.0, t0 + 4.3, app, _events(t0))
    assert list(got) == [name for name, _ in launch_timeline.PHASES]
    assert got["client start"] == pytest.approx(0.1) and got["submission"] == pytest.approx(0.4)
    assert got["AM start"] == pytest.approx(2.0) and got["containers"] == pytest.approx(0.6)
    assert got["command"] == pytest.approx(0.3)  # to the last WORKER's end: the ps is stopped by the AM
    assert got["end of job"] == pytest.approx(1.0) and got["client end"] == pytest.approx(1.0)
    assert sum(got.values()) == pytest.approx(7.0)


def test_a_run_without_a_moment_is_named():
    with pytest.raises(launch_timeline.TimelineError, match="AM_STARTED"):
        launch_timeline.phases(0.0, 1.0, 0.5, {"startedTime": 1, "launchTime": 2, "finishedTime": 3},
                               [e for e in _events(0.0) if e["event"] != "AM_STARTED"])
    with pytest.raises(launch_timeline.TimelineError, match="launchTime"):
        launch_timeline.phases(0.0, 1.0, 0.5, {"startedTime": 1, "finishedTime": 3}, _events(0.0))


def test_the_timeline_report_names_the_largest_phases_and_half_of_tonys_time():
    runs = [launch_timeline.phases(0.0, 7.0, 4.3, {"startedTime": 500, "launchTime": 1000, "finishedTime": 6000},
                                   _events(0.0))] * 3
    report = launch_latency.timeline_report(runs, 3, tony_wall=10.0)
    assert report.rows[-1][:2] == ["sum of medians", "7.00"]
    assert "largest phases: AM start 2.00 s" in report.notes[1]
    assert "half of it is 5.00 s" in report.notes[2]
    assert launch_latency.AIM_WALL_VS_TONY == 0.5
