"""STDERR_MB of stderr on one line with no newline, then exit 3 (issue #15, item 17)."""
import os
import sys

chunk = "y" * 2**20
for _ in range(int(os.environ.get("STDERR_MB", "50"))):
    sys.stderr.write(chunk)
sys.stderr.write(" the end of a very long line")
sys.stderr.flush()
sys.exit(3)
