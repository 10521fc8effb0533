"""The tasks' own output, live: `ytf-submit --follow` on the real local cluster (through the RM's proxy),
the rest from YARN's aggregated logs once the AM is gone, and the failing task's last lines."""

from __future__ import annotations

import re
import statistics
import subprocess
import time

from tests.e2e.helpers import BIN, PAYLOADS, record, ytf_submit


def test_follow_prints_the_chiefs_lines_as_they_come_and_the_failing_tasks_last_lines(local_cluster, rm):
    cmd = [str(BIN / "ytf-submit"), "-r", "worker:2", "-m", "384", "--follow",
           "-s", str(PAYLOADS / "live_lines.py"), "python3 ${DTF_TASK_SCRIPT}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    arrivals: list[tuple[float, str]] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        arrivals.append((time.time(), line.rstrip("\n")))
    stderr = proc.stderr.read() if proc.stderr else ""
    assert proc.wait(timeout=60) == 1, stderr
    lines = [text for _, text in arrivals]
    app_id = re.search(r"Submitted application (application_\d+_\d+)", "\n".join(lines)).group(1)  # type: ignore[union-attr]
    ours = [text for text in lines if text.startswith("[worker:0] ")]
    # every line of worker:0 exactly once, in order, the last one without its newline too
    assert [re.sub(r" printed at .*", "", t) for t in ours] == (
        [f"[worker:0] line {i}" for i in range(8)] + ["[worker:0] the end without a newline"]), lines
    # the failing task's last lines, after the chief's, its own output (stdout and stderr)
    at = lines.index("last lines of worker:1, which failed:")
    assert lines[at + 1:at + 4] == ["[worker:1] worker:1 about to fail", "[worker:1] Traceback (most recent call last):",
                                    "[worker:1] ValueError: loss is NaN at step 7"]
    assert "worker:1 exited with code 1" in stderr.strip().splitlines()[-1]
    assert rm.application(app_id).final_status == "FAILED"
    # how long a printed line took to reach the submitting terminal (through the RM's proxy while it ran)
    delays = [at_ - float(t.rsplit(" ", 1)[1]) for at_, t in arrivals if " printed at " in t]
    record("live output delay, median (s)", statistics.median(delays))
    record("live output delay, max (s)", max(delays))


def test_follow_shows_every_line_of_a_job_that_prints_and_exits_at_once(local_cluster, rm):
    """Issue #51 item 9: `ytf-submit --follow "python3 -c \"print('hello')\""` printed only progress lines (2 of
    2 runs): the output reached the AM and the job ended between two polls of the follower."""
    for run in range(2):
        proc, app_id = ytf_submit("-r", "worker:1", "-m", "384", "--follow",
                                  "python3 -c \"[print('hello', i) for i in range(3)]\"")
        assert proc.returncode == 0 and app_id, proc.stdout + proc.stderr
        ours = [line for line in proc.stdout.splitlines() if line.startswith("[worker:0] ")]
        assert ours == [f"[worker:0] hello {i}" for i in range(3)], (run, proc.stdout, proc.stderr)
