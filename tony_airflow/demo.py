"""`make demo`: run the example job on the local YARN cluster and say how it went."""

from __future__ import annotations

import sys
from pathlib import Path

from tony_airflow import submit


def main() -> None:
    script = Path(__file__).with_name("examples") / "hello_cluster.py"
    submit.main(["-r", "ps:1,worker:2", "-m", "512", "-n", "tony-airflow-demo",
                 "-s", str(script), "python3 ${DTF_TASK_SCRIPT}"] + sys.argv[1:])


if __name__ == "__main__":
    main()
