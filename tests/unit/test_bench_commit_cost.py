"""bench.commit_cost's arithmetic (issue #50): when a save counts as in HDFS, and the p95 of the delays."""

from __future__ import annotations

import io

import pytest

from bench.commit_cost import _p95, _peek_step, presence_delays


def test_a_save_is_present_once_hdfs_holds_it_or_a_later_one_before_the_writer_ended():
    closed = {1: 10.0, 2: 10.4, 3: 10.8, 4: 11.2}
    present = [(10.5, 1), (11.5, 3), (12.0, None), (30.0, 4)]  # step 4 only after the writer's end (20.0)
    delays = presence_delays(closed, present, until=20.0)
    assert delays[:3] == pytest.approx([0.5, 1.1, 0.7]) and delays[3] is None


def test_p95_is_a_value_of_the_sample():
    assert _p95([1.0]) == 1.0
    assert _p95([float(n) for n in range(1, 101)]) == 95.0
    assert _p95([3.0, 1.0, 2.0]) == 3.0


def test_the_step_an_upload_begins_with_is_read_without_moving_the_upload():
    assert _peek_step((7).to_bytes(8, "big") + b"body") == 7
    body = io.BytesIO((42).to_bytes(8, "big") + b"rest")
    body.read(2)
    assert _peek_step(body) == int.from_bytes(((42).to_bytes(8, "big") + b"rest")[2:10], "big")
    assert body.tell() == 2
    assert _peek_step(object()) is None

