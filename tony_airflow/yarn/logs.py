"""Container logs through Hadoop's own reader (`yarn logs`, LogsCLI).

After the job, LogsCLI reads the logs aggregated into HDFS (Hadoop 3.4's
IFile/TFile layout); while it runs, it asks the NodeManager for them. Either
way the bytes come from Hadoop, not from a reader of our own.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from tony_airflow.yarn.discovery import discover

if TYPE_CHECKING:
    from tony_airflow.yarn.rest import ApplicationReport

log = logging.getLogger(__name__)

# skein writes a container's stdout and stderr (the executor's own log) to `<service>.log`;
# the command's output is in `tony-output-<type>-<index>-a<attempt>.txt` (core/output.py);
# prelaunch.err holds what went wrong before the command could start.
TASK_LOG_PATTERN = r"(.*\.log|tony-output-.*\.txt|prelaunch\.err)"


# Hadoop's LogAggregationStatus values after which the RM's answer no longer changes ("": an RM that does not
# say). Before them, `yarn logs` of a finished application prints the nodes uploaded so far, without a word.
AGGREGATION_OVER = frozenset({"SUCCEEDED", "FAILED", "TIME_OUT", "DISABLED", ""})
AGGREGATION_WAIT_S = 60.0  # a NodeManager uploads an ended application's logs within seconds
AGGREGATION_POLL_S = 1.0
# NOT_START this long after the first look at a finished application: no NodeManager has anything to upload
# (killed before any container ran); one that does says RUNNING within its next heartbeat
NOT_START_GRACE_S = 5.0


def aggregation_over(report: ApplicationReport) -> bool:
    """Whether what `yarn logs` reads of this application is all there will be for now: a running application's
    logs come from its NodeManagers; a finished one's from HDFS, once every node has uploaded."""
    return not report.is_terminal or report.log_aggregation in AGGREGATION_OVER


def wait_until_aggregated(report: Callable[[], ApplicationReport], wait: float = AGGREGATION_WAIT_S,
                          clock: Callable[[], float] = time.monotonic,
                          pause: Callable[[float], None] = time.sleep) -> str | None:
    """Wait until the RM says a finished application's logs are all uploaded. None when there is nothing (more)
    to wait for (also an RM that cannot be read: the logs are read as they are); else the status the RM gave
    last when `wait` s ran out, for the reader to say that what follows may miss some nodes' logs."""
    started = clock()
    deadline = started + wait
    while True:
        try:
            seen = report()
        except Exception as exc:
            log.debug("log aggregation not known (%s): reading the logs as they are", exc)
            return None
        if aggregation_over(seen) or (seen.log_aggregation == "NOT_START"
                                      and clock() - started >= NOT_START_GRACE_S):
            return None
        if clock() >= deadline:
            return seen.log_aggregation
        pause(AGGREGATION_POLL_S)


def logs_command(app_id: str, container_id: str | None = None, pattern: str | None = None) -> list[str]:
    cmd = ["yarn", "logs", "-applicationId", app_id]
    if container_id:
        cmd += ["-containerId", container_id]
    if pattern:
        cmd += ["-log_files_pattern", pattern]
    return cmd


def hadoop_env(conf_dir: str | None = None) -> dict[str, str]:
    """This process's environment plus what Hadoop's `yarn` command needs for the cluster."""
    return dict(os.environ, **discover(conf_dir).environment)


def print_logs(app_id: str, container_id: str | None = None, pattern: str | None = None) -> int:
    return subprocess.run(logs_command(app_id, container_id, pattern), env=hadoop_env()).returncode


def read_logs(app_id: str, container_id: str | None = None, pattern: str | None = None,
              timeout: float = 120, conf_dir: str | None = None) -> tuple[int, str]:
    """(exit code, output) of `yarn logs`; a missing or hung `yarn` is an answer (127, 124), not an error."""
    command = logs_command(app_id, container_id, pattern)
    try:
        proc = subprocess.run(command, env=hadoop_env(conf_dir), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, f"{command[0]} logs did not answer within {timeout:.0f}s"
    except OSError as exc:
        return 127, f"{command[0]} could not be run: {exc}"
    return proc.returncode, proc.stdout + proc.stderr


def log_lines(app_id: str, container_id: str | None = None, pattern: str | None = None, timeout: float = 120,
              conf_dir: str | None = None) -> Iterator[str]:
    """The lines of `yarn logs` as it writes them, never its whole output at once (a task may print
    gigabytes). A `yarn` that cannot run yields nothing; one still running after `timeout` s is killed."""
    try:
        proc = subprocess.Popen(logs_command(app_id, container_id, pattern), env=hadoop_env(conf_dir),
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, encoding="utf-8",
                                errors="replace")
    except OSError:
        return
    timer = threading.Timer(timeout, proc.kill)
    timer.daemon = True
    timer.start()
    try:
        assert proc.stdout is not None
        yield from proc.stdout
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
