"""Issue #53 item 5: the terminal's progress line as a person sees it: a task's line never glued onto it, the
end said once (by the caller, after the failing task's last lines), no YARN RUNNING after every task ended."""

from __future__ import annotations

import io

from tests.terminal import screen
from tony_airflow.core.presentation import ProgressPrinter
from tony_airflow.core.protocol import Progress
from tony_airflow.yarn.rest import ApplicationReport

APP = "application_1_0001"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _report(state: str, final: str = "UNDEFINED", url: str = "") -> ApplicationReport:
    return ApplicationReport(APP, state, final, tracking_url=url)


def _progress(finished: int = 0) -> Progress:
    return Progress(attempt=1, max_attempts=1, total=2, allocated=2, registered=2, running=2 - finished,
                    finished=finished, spec_published=True)


def test_a_tasks_line_goes_above_the_live_line_and_the_end_is_left_to_the_caller():
    term = Terminal()
    printer = ProgressPrinter(APP, stream=term, out=term)
    printer(_report("ACCEPTED"), None)
    printer(_report("RUNNING", url="http://rm/proxy/x/"), _progress())
    printer.above("[worker:0] WARNING: something", term)
    printer.above("[worker:0] step 1", term)
    printer(_report("RUNNING"), _progress(finished=2))
    printer(_report("RUNNING"), None)  # the AM unregistering: no progress, YARN still RUNNING
    printer(_report("FINISHED", "SUCCEEDED"), None)
    print(f"{APP} SUCCEEDED", file=term)  # the runner's one line of the end
    shown = screen(term.getvalue())
    assert shown == ["Tracking URL: http://rm/proxy/x/", "[worker:0] WARNING: something", "[worker:0] step 1",
                     f"{APP} SUCCEEDED"], shown
    assert "FINISHED" not in term.getvalue()
    assert f"{APP} RUNNING\x1b" not in term.getvalue() and not term.getvalue().endswith(f"{APP} RUNNING")


def test_plain_lines_when_not_a_terminal_and_no_end_either():
    out = io.StringIO()
    printer = ProgressPrinter(APP, stream=out, out=out)
    printer(_report("RUNNING"), _progress())
    printer(_report("RUNNING"), _progress(finished=2))
    printer(_report("RUNNING"), None)
    printer(_report("FINISHED", "FAILED"), None)
    assert out.getvalue().splitlines() == [f"{APP} RUNNING · attempt 1/1 · running",
                                           f"{APP} RUNNING · attempt 1/1 · finished"]


def _training(step: int, loss: float) -> dict:
    return {"task": "worker:0", "step": step, "total_steps": 100, "epoch": 1, "total_epochs": 2,
            "percent": float(step), "eta_s": 100.0 - step, "metrics": {"loss": loss}, "updated": 1.0,
            "source": "report"}


def test_the_training_part_joins_the_line_and_a_log_gets_it_at_most_every_few_seconds(monkeypatch):
    """Issue #52: `... · running · epoch 1/2 · 10% · ~2 min left · loss 0.5`, not a line per report."""
    from dataclasses import replace

    from tony_airflow.core import presentation

    clock = [100.0]
    monkeypatch.setattr(presentation.time, "monotonic", lambda: clock[0])
    log = io.StringIO()
    printer = ProgressPrinter(APP, stream=log, out=log)
    running = _report("RUNNING", url="http://rm/proxy/x/")
    printer(running, _progress())
    printer(running, replace(_progress(), training=_training(10, 0.5)))  # the first numbers: at once
    for step in range(11, 20):
        clock[0] += 0.5
        printer(running, replace(_progress(), training=_training(step, 0.4)))
    clock[0] += 1.0  # 5.5 s since the last line
    printer(running, replace(_progress(), training=_training(25, 0.3)))
    printer(running, _progress(finished=1))  # a change of the counts: at once, training or not
    lines = [line for line in log.getvalue().splitlines() if line.startswith(APP)]
    assert lines == [f"{APP} RUNNING · attempt 1/1 · running",
                     f"{APP} RUNNING · attempt 1/1 · running · epoch 1/2 · 10% · ~2 min left · loss 0.5",
                     f"{APP} RUNNING · attempt 1/1 · running · epoch 1/2 · 25% · ~1 min left · loss 0.3",
                     f"{APP} RUNNING · attempt 1/1 · running"], lines
