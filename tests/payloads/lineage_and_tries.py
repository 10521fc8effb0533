"""Payload for the real Airflow deployment's retried task: prints the OpenLineage variables it was given
(one line, `lineage {...}`), and fails on the task's first try (AIRFLOW_TRY, templated by the DAG)."""

import json
import os
import sys

given = {k: v for k, v in os.environ.items() if k.startswith("OPENLINEAGE")}
print("lineage " + json.dumps(given, sort_keys=True), flush=True)
if os.environ.get("AIRFLOW_TRY") == "1":
    print("failing the first try on purpose", flush=True)
    sys.exit(3)
print("second try: done", flush=True)
