"""bench/torch_elastic.py's figures: from the kill to the replacement, to the first optimizer step after it (the
training stepping again) and to the first epoch printed after it."""

from __future__ import annotations

import pytest

from bench.torch_elastic import KilledWorker, epoch_line_seconds, recovery_seconds, timeline

LOGS = """rank 1: first step at epoch 0 at 2026-11-27T22:00:01.000+00:00
epoch 3 loss 0.5000 at 2026-11-27T22:00:05+00:00
epoch 4 loss 0.4000 at 2026-11-27T22:00:09+00:00
[I socket.cpp] something else
tony rendezvous: placed as worker:1 at 2026-11-27T22:00:13.500+00:00
tony rendezvous: round 2: rank 1 of 3, rank 0 at h:1, formed at 2026-11-27T22:00:14.000+00:00 (node worker:1@c#9.0)
rank 2: first step at epoch 4 at 2026-11-27T22:00:17.250+00:00 (process up 2.75 s, 1.90 s CPU)
rank 0: first step at epoch 4 at 2026-11-27T22:00:16.750+00:00
says rank 0: first step at epoch 4 at 2026-11-27T22:00:12.000+00:00
epoch 4 loss 0.4000 at 2026-11-27T22:00:31+00:00
epoch 5 loss 0.3000 at 2026-11-27T22:00:29.500000+00:00
"""
KILLED_AT = 1795816810.0  # 2026-11-27T22:00:10Z


def _run(events: list[dict]) -> KilledWorker:
    return KilledWorker("application_1_0001", "container_1_0001_01_000004", KILLED_AT, 0, "", "", events)


def test_the_times_count_from_the_kill_and_take_the_first_step_and_epoch_after_it():
    run = _run([{"event": "WORKER_REPLACED", "time": KILLED_AT + 8.5}])
    replaced, stepping = recovery_seconds(run, LOGS)
    assert replaced == pytest.approx(8.5)
    # the earliest first step after the kill, whichever rank printed it; not the one before the kill, nor a
    # line that only holds the words further on
    assert stepping == pytest.approx(6.75)
    assert epoch_line_seconds(run, LOGS) == pytest.approx(19.5)  # epoch 5's line (another rank), not the later 4


def test_no_step_or_epoch_after_the_kill_is_said():
    run = _run([{"event": "WORKER_REPLACED", "time": KILLED_AT + 1}])
    with pytest.raises(RuntimeError, match="no first step was printed after the kill"):
        recovery_seconds(run, LOGS.splitlines()[0])
    with pytest.raises(RuntimeError, match="no epoch was printed after the kill"):
        epoch_line_seconds(run, LOGS.splitlines()[1])


def test_the_timeline_puts_the_events_and_lines_after_the_kill_in_order():
    run = _run([{"event": "WORKER_LOST", "task": "worker:1", "time": KILLED_AT + 1.5},
                {"event": "SPARE_WAITING", "time": KILLED_AT - 30},
                {"event": "WORKER_REPLACED", "task": "worker:1", "time": KILLED_AT + 2.5}])
    assert timeline(run, LOGS) == ("WORKER_LOST worker:1 1.5, WORKER_REPLACED worker:1 2.5, placed 3.5, round 4.0, "
                                   "process started (1.90 s CPU until its step) 4.5, first step 6.8, first step 7.2")


def test_each_variant_is_judged_against_its_own_aim_and_a_miss_is_said():
    from bench.torch_elastic import verdict

    assert verdict("1 spare", [4.0, 9.9]) == "1 spare: slowest 9.9 s against 10 s: aim met"
    assert verdict("1 spare", [4.0, 12.5]) == "1 spare: slowest 12.5 s against 10 s: aim missed"
    assert verdict("no spare", [21.4]) == "no spare: slowest 21.4 s against 30 s: aim met"
