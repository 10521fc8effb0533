"""Payload for the real Airflow deployment's retried task: prints the OpenLineage variables it was given
(one line, `lineage {...}`), fails on the task's first try (AIRFLOW_TRY, templated by the DAG), and on the
second reports its progress for ten steps of a second (the one line of docs/progress.md)."""

import json
import os
import sys
import time

import tony_progress  # shipped by the executor onto the program's PYTHONPATH

given = {k: v for k, v in os.environ.items() if k.startswith("OPENLINEAGE")}
print("lineage " + json.dumps(given, sort_keys=True), flush=True)
if os.environ.get("AIRFLOW_TRY") == "1":
    print("failing the first try on purpose", flush=True)
    sys.exit(3)
STEPS = 10
for step in range(1, STEPS + 1):
    time.sleep(1)
    tony_progress.report(step=step, total_steps=STEPS, metrics={"loss": round(1.0 / step, 4)})
print("second try: done", flush=True)
