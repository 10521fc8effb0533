"""bench/torch_elastic.py's figures: from the kill to the replacement and to the first epoch printed after it."""

from __future__ import annotations

import pytest

from bench.torch_elastic import KilledWorker, recovery_seconds

LOGS = """epoch 3 loss 0.5000 at 2026-11-27T22:00:05+00:00
epoch 4 loss 0.4000 at 2026-11-27T22:00:09+00:00
[I socket.cpp] something else
epoch 4 loss 0.4000 at 2026-11-27T22:00:31+00:00
epoch 5 loss 0.3000 at 2026-11-27T22:00:29.500000+00:00
"""
KILLED_AT = 1795816810.0  # 2026-11-27T22:00:10Z


def _run(events: list[dict]) -> KilledWorker:
    return KilledWorker("application_1_0001", "container_1_0001_01_000004", KILLED_AT, 0, "", "", events)


def test_the_times_count_from_the_kill_and_take_the_first_epoch_after_it():
    replaced, stepping = recovery_seconds(_run([{"event": "WORKER_REPLACED", "time": KILLED_AT + 8.5}]), LOGS)
    assert replaced == pytest.approx(8.5)
    assert stepping == pytest.approx(19.5)  # epoch 5's line (printed by another rank), not the later epoch 4


def test_no_epoch_after_the_kill_is_said():
    with pytest.raises(RuntimeError, match="no epoch was printed after the kill"):
        recovery_seconds(_run([{"event": "WORKER_REPLACED", "time": KILLED_AT + 1}]), LOGS.splitlines()[0])


def test_each_variant_is_judged_against_its_own_aim_and_a_miss_is_said():
    from bench.torch_elastic import verdict

    assert verdict("1 spare", [4.0, 9.9]) == "1 spare: slowest 9.9 s against 10 s: aim met"
    assert verdict("1 spare", [4.0, 12.5]) == "1 spare: slowest 12.5 s against 10 s: aim missed"
    assert verdict("no spare", [21.4]) == "no spare: slowest 21.4 s against 30 s: aim met"
