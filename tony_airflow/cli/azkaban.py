"""`tony-azkaban`: the entry point Azkaban's jobtype runs (azkaban_jobtype/tensorflow/plugin.properties).

Reads the job's properties from $JOB_PROP_FILE (engines/azkaban.py maps them onto
a job spec), runs the job to completion and writes the output properties.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from tony_airflow.cli.common import OneLineParser, run
from tony_airflow.engines import azkaban


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="tony-azkaban", description="Azkaban jobtype entry point: runs the job whose "
                                                       "properties are in $JOB_PROP_FILE on YARN.")

    def run_job(_args: Any) -> int:
        return azkaban.run(os.environ)

    p.set_defaults(func=run_job)
    return p


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(argv, build_parser))


if __name__ == "__main__":
    main()
