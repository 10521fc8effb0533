"""Issue #53 item 5: `ytf-submit` on a real terminal (a pseudo-terminal), its output read as the screen shows
it: no task line glued onto the live progress line, the end said once, and a failing job's last output lines
before its final status line."""

from __future__ import annotations

import os
import pty
import re
import subprocess

from tests.e2e.helpers import BIN, PAYLOADS
from tests.terminal import screen


def on_a_terminal(*args: str, timeout: float = 300) -> tuple[int, list[str], str]:
    """Run ytf-submit with stdout and stderr on one pseudo-terminal: (exit code, the screen's lines, raw)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([str(BIN / "ytf-submit"), *args], stdin=subprocess.DEVNULL, stdout=follower,
                            stderr=follower, close_fds=True)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the program and every child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    code = proc.wait(timeout=timeout)
    raw = b"".join(chunks).decode(errors="replace")
    return code, screen(raw), raw


def _app_id(lines: list[str]) -> str:
    return re.search(r"Submitted application (application_\d+_\d+)", "\n".join(lines)).group(1)  # type: ignore[union-attr]


def test_a_failing_job_on_a_terminal(local_cluster, rm):
    code, lines, raw = on_a_terminal("-r", "worker:2", "-m", "384", "-s", str(PAYLOADS / "live_lines.py"),
                                     "python3 ${DTF_TASK_SCRIPT}")
    assert code == 1, raw
    app_id = _app_id(lines)
    assert "\r\x1b[K" in raw  # the live line was drawn: this is the terminal's rendering, not plain lines
    # no task line glued onto the progress line: a line that starts with the app id holds nothing of a task
    assert not [line for line in lines if line.startswith(app_id) and "[worker:" in line], lines
    ours = [line for line in lines if line.startswith("[worker:0] ")]
    assert [re.sub(r" printed at .*", "", t) for t in ours] == (
        [f"[worker:0] line {i}" for i in range(8)] + ["[worker:0] the end without a newline"]), lines
    # the failing task's last lines, then the end, once, as the very last line
    at = lines.index("last lines of worker:1, which failed:")
    assert lines[at + 1:at + 4] == ["[worker:1] worker:1 about to fail", "[worker:1] Traceback (most recent call last):",
                                    "[worker:1] ValueError: loss is NaN at step 7"], lines
    assert lines[-1].startswith(f"{app_id} FAILED: ") and "worker:1 exited with code 1" in lines[-1], lines
    assert [line for line in lines if "FAILED" in line] == [lines[-1]], lines
    assert rm.application(app_id).final_status == "FAILED"


def test_a_succeeding_job_on_a_terminal_says_its_end_once(local_cluster, rm):
    code, lines, raw = on_a_terminal("-r", "worker:1", "-m", "384", "echo first; sleep 3; echo second")
    assert code == 0, raw
    app_id = _app_id(lines)
    assert lines[-1] == f"{app_id} SUCCEEDED", lines
    assert [line for line in lines if "SUCCEEDED" in line or "FINISHED" in line] == [lines[-1]], lines
    assert [line for line in lines if line.startswith("[worker:0] ")] == ["[worker:0] first", "[worker:0] second"]
    assert not [line for line in lines if line.startswith(app_id) and "[worker:" in line], lines
    # what the live line said last never goes back from `finished` to YARN's bare RUNNING
    drawn = [part for part in re.split(r"\r\x1b\[K", raw) if part.startswith(app_id)]
    finished = next((i for i, part in enumerate(drawn) if "· finished" in part), None)
    assert finished is None or not [p for p in drawn[finished:] if p.strip() == f"{app_id} RUNNING"], drawn


def test_a_detached_job_is_followed_again(local_cluster, rm):
    """Issue #53 item 7: after `--detach`, `tony follow APP` shows the job as ytf-submit would, to its end;
    `tony logs -f APP` of the ended job gives the chief's output from YARN's logs and the same end."""
    detached = subprocess.run([str(BIN / "ytf-submit"), "--detach", "-r", "worker:1", "-m", "384",
                               "echo one; sleep 6; echo two"], capture_output=True, text=True, timeout=120)
    assert detached.returncode == 0, detached.stderr
    app_id = _app_id(detached.stdout.splitlines())
    assert f"follow it with `tony follow {app_id}`" in detached.stdout
    followed = subprocess.run([str(BIN / "tony"), "follow", app_id], capture_output=True, text=True, timeout=300)
    assert followed.returncode == 0, followed.stderr
    lines = followed.stdout.splitlines()
    assert [line for line in lines if line.startswith("[worker:0] ")] == ["[worker:0] one", "[worker:0] two"], lines
    assert lines[-1] == f"{app_id} SUCCEEDED", lines
    again = subprocess.run([str(BIN / "tony"), "logs", "-f", app_id], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-3:] == ["[worker:0] one", "[worker:0] two", f"{app_id} SUCCEEDED"], again.stdout
