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
