"""Every retry loop's policy in one place, on tenacity (a dependency of Airflow's own): which errors are
tried again, the pauses between tries, when to give up. Callers say what a try is; this says how often.

- `rounds`: rounds over HA daemons while none serves (an election takes seconds): pauses doubling from
  `base_s` to `max_s`, no try started after `wait_s` (Hadoop's failover proxies, WebHdfsFileSystem's
  failover policy, bounded).
- `tries`: a fixed number of tries with growing pauses (`pause_s`, then 2×, 3×…), for calls whose
  failures are brief (a lost answer, a dropped connection, a NameNode restarting).

Used by: the RM client and WebHDFS (HA rounds, yarn/rest.py, yarn/hdfs.py, yarn/failover.py), the
submission's lost answer (yarn/submission.py), the final push of the output (core/executor/output_commit.py),
the executor's calls to the AM (core/executor/task.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import tenacity

Retryable = type[BaseException] | tuple[type[BaseException], ...]


def rounds(wait_s: float, base_s: float, max_s: float, retry_on: Retryable) -> tenacity.Retrying:
    """Try again on `retry_on`, pausing base_s, 2×, 4×… up to max_s, until a try would start after wait_s;
    then the last error is raised as it is."""
    return tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(retry_on),
        wait=tenacity.wait_exponential(multiplier=base_s, max=max_s),
        stop=tenacity.stop_before_delay(wait_s),
        reraise=True)


def tries(count: int, pause_s: float, retry_on: Callable[[BaseException], bool],
          log: logging.Logger | None = None, what: str = "", at_once: bool = False) -> tenacity.Retrying:
    """At most `count` tries, pausing pause_s × the number of tries made (× one fewer `at_once`: the first
    try again without a pause), on errors `retry_on` accepts; each retried failure logged as a warning
    naming `what`; then the last error is raised as it is."""
    def warn(state: tenacity.RetryCallState) -> None:
        if log is not None and state.outcome is not None:
            log.warning("%s failed (try %d/%d): %s", what, state.attempt_number, count, state.outcome.exception())

    return tenacity.Retrying(
        retry=tenacity.retry_if_exception(retry_on),
        wait=tenacity.wait_incrementing(start=0.0 if at_once else pause_s, increment=pause_s),
        stop=tenacity.stop_after_attempt(count),
        before_sleep=warn,
        reraise=True)
