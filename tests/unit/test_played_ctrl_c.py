"""Issue #51 item 15: the tests that play a user's Ctrl-C start their process as a terminal would, with SIGINT
at its default, also when the suite itself runs with SIGINT ignored (a background job, nohup, CI)."""

from __future__ import annotations

import signal
import subprocess
import sys

from tests.e2e.helpers import as_from_a_terminal

SAYS = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"


def _started(**kwargs) -> str:
    return subprocess.run([sys.executable, "-c", SAYS], capture_output=True, text=True, check=True,
                          **kwargs).stdout.strip()


def test_a_process_started_as_from_a_terminal_takes_ctrl_c_when_the_suite_ignores_it():
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `make test > log 2>&1 &` starts the suite
    try:
        assert _started() == "False"  # inherited: the product keeps it ignored, and a played Ctrl-C does nothing
        assert _started(preexec_fn=as_from_a_terminal) == "True"
    finally:
        signal.signal(signal.SIGINT, before)
