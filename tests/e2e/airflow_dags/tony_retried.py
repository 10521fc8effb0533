"""A training that fails its first try and succeeds on the retry, for the real deployment (issue #52: each
try's links, the parent run in the containers' environment). Copied into the deployment's DAG folder: the
payload is found through the installed (editable) package."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG

import tony_airflow
from tony_airflow.providers.yarn.operators.tensorflow import TensorFlowOnYarnOperator

PAYLOADS = Path(tony_airflow.__file__).resolve().parents[1] / "tests" / "payloads"

with DAG("tony_retried", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False):
    TensorFlowOnYarnOperator(task_id="train", cluster_requirement="worker:1", task_memory="512",
                             script=str(PAYLOADS / "lineage_and_tries.py"), command="python3 ${DTF_TASK_SCRIPT}",
                             env={"AIRFLOW_TRY": "{{ ti.try_number }}"}, retries=1,
                             retry_delay=timedelta(seconds=0), poll_interval=1)
