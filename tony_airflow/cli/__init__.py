"""The command lines: thin adapters that parse arguments, call the core, and exit 0, 1 or 2.

- `tony` (tony.py): the local cluster, submit, status, kill, history, logs, oozie workflow
- `ytf-submit` (submit.py): the submitter (docs/submitting.md)
- `tony-azkaban` (azkaban.py), `tony-oozie` (oozie.py): the workflow engines' entry points
- `python -m tony_airflow.cli.dag_test` (dag_test.py): one DAG file through Airflow's `dag.test()`

common.py holds what they share: the one-line parser and the error-to-exit-code runner.
Nothing outside this package imports it.
"""

import sys
from pathlib import Path

from tony_airflow.lean import lean_imports

COMMANDS = frozenset({"tony", "ytf-submit", "tony-azkaban", "tony-oozie"})  # pyproject's scripts

if Path(sys.argv[0]).name in COMMANDS:  # a command's own process, not a host importing us (pytest)
    lean_imports()
