"""Issue #53 item 7: a command whose reader leaves early (`tony history show APP | head`) ends quietly, exit 0,
no BrokenPipeError on stderr."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import argparse
from tony_airflow.cli.common import run

def many_lines(args):
    for i in range(200_000):
        print(f"line {i}")
    return 0

def parser():
    p = argparse.ArgumentParser()
    p.set_defaults(func=many_lines)
    return p

raise SystemExit(run([], parser))
"""


def test_a_closed_pipe_ends_quietly():
    writer = subprocess.Popen([sys.executable, "-c", PROGRAM], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert writer.stdout is not None
    first = writer.stdout.readline()
    writer.stdout.close()  # what `| head -1` does once it has its line
    code = writer.wait()
    err = writer.stderr.read().decode() if writer.stderr else ""
    assert first == b"line 0\n"
    assert code == 0, err
    assert "BrokenPipeError" not in err and "Traceback" not in err, err
