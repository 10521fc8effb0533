"""The one retry policy module (issue #44 item 9): what each policy tries again, how it paces, when it stops."""

from __future__ import annotations

import logging
import time

import pytest
import tenacity

from tony_airflow import retries


class Flaky(Exception):
    pass


def _failing(times: int, error: type[BaseException] = Flaky):
    calls: list[float] = []

    def call() -> str:
        calls.append(time.monotonic())
        if len(calls) <= times:
            raise error(f"try {len(calls)}")
        return "served"

    return call, calls


def test_rounds_pause_doubling_to_a_cap_and_start_no_try_after_the_wait():
    slept: list[float] = []
    policy = retries.rounds(wait_s=10.0, base_s=0.5, max_s=2.0, retry_on=Flaky).copy(sleep=slept.append)
    call, _ = _failing(4)
    assert policy(call) == "served"
    assert slept == [0.5, 1.0, 2.0, 2.0]


def test_rounds_give_up_with_the_last_error_as_it_is():
    policy = retries.rounds(wait_s=0.05, base_s=0.02, max_s=0.02, retry_on=Flaky)
    call, calls = _failing(1000)
    with pytest.raises(Flaky, match=r"try \d+"):
        policy(call)
    assert 2 <= len(calls) <= 4
    assert calls[-1] - calls[0] < 0.05  # no try started after the wait


def test_rounds_with_no_wait_try_once_and_other_errors_are_not_retried():
    call, calls = _failing(5)
    with pytest.raises(Flaky):
        retries.rounds(0.0, 0.5, 5.0, Flaky)(call)
    assert len(calls) == 1
    call, calls = _failing(5, ValueError)
    with pytest.raises(ValueError):
        retries.rounds(60.0, 0.5, 5.0, Flaky)(call)
    assert len(calls) == 1


def test_tries_pause_longer_each_time_and_log_each_retried_failure(caplog):
    slept: list[float] = []
    log = logging.getLogger("test.retries")
    policy = retries.tries(3, 2.0, lambda e: isinstance(e, Flaky), log=log, what="the push").copy(sleep=slept.append)
    call, calls = _failing(5)
    with caplog.at_level(logging.WARNING, "test.retries"), pytest.raises(Flaky, match="try 3"):
        policy(call)
    assert len(calls) == 3 and slept == [2.0, 4.0]
    assert [r.getMessage() for r in caplog.records] == ["the push failed (try 1/3): try 1",
                                                        "the push failed (try 2/3): try 2"]


def test_tries_at_once_first_try_again_without_a_pause():
    slept: list[float] = []
    policy = retries.tries(4, 0.5, lambda e: True, at_once=True).copy(sleep=slept.append)
    call, _ = _failing(3)
    assert policy(call) == "served"
    assert slept == [0.0, 0.5, 1.0]


def test_an_interrupt_is_never_tried_again_by_the_final_push():
    from tony_airflow.core.executor.output_commit import WriterFenced, _retried_at_the_end

    assert _retried_at_the_end(OSError("link down"))
    assert not _retried_at_the_end(KeyboardInterrupt())
    assert not _retried_at_the_end(WriterFenced("attempt 3 claimed the output"))


def test_the_policies_are_tenacitys():
    assert isinstance(retries.tries(2, 1.0, lambda e: True), tenacity.Retrying)
