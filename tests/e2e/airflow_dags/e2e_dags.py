"""DAGs the end-to-end tests run with dag.test(): a failing training, a long one to kill, deferrable waits."""

from __future__ import annotations

import os
from pathlib import Path

import pendulum
from airflow.sdk import DAG

from tony_airflow.providers.yarn.operators.tensorflow import TensorFlowOnYarnOperator
from tony_airflow.providers.yarn.sensors.yarn import YarnApplicationSensor

PAYLOADS = Path(__file__).resolve().parents[2] / "payloads"
START = pendulum.datetime(2026, 1, 1, tz="UTC")
SMALL = {"task_memory": "512", "command": "python3 ${DTF_TASK_SCRIPT}"}

with DAG("tony_failing", schedule=None, start_date=START, catchup=False):
    TensorFlowOnYarnOperator(task_id="train", cluster_requirement="ps:1,worker:2",
                             script=str(PAYLOADS / "exit_code.py"), poll_interval=1, **SMALL)

with DAG("tony_killable", schedule=None, start_date=START, catchup=False):
    TensorFlowOnYarnOperator(task_id="train", cluster_requirement="ps:1,worker:1", tensorboard=True,
                             output_path="hdfs:///tmp/e2e/airflow-killable",
                             script=str(PAYLOADS / "sleep.py"), poll_interval=1, **SMALL)

with DAG("tony_deferrable", schedule=None, start_date=START, catchup=False):
    deferred = TensorFlowOnYarnOperator(task_id="train", cluster_requirement="worker:1", deferrable=True,
                                        script=str(PAYLOADS / "sleep.py"), env={"SLEEP_S": "8", "TICK": "1"},
                                        poll_interval=1, **SMALL)
    submit = TensorFlowOnYarnOperator(task_id="submit", cluster_requirement="worker:1", wait_for_completion=False,
                                      script=str(PAYLOADS / "sleep.py"), env={"SLEEP_S": "5"}, **SMALL)
    wait = YarnApplicationSensor(task_id="wait", application_id="{{ ti.xcom_pull(task_ids='submit') }}",
                                 deferrable=True, poke_interval=1, timeout=300)
    deferred >> submit >> wait

# issue #51 item 9: a job that prints and exits at once, between two of the trigger's polls (its lines never
# reached the task log); poll_interval 10 s makes that the likely timing
with DAG("tony_short_output", schedule=None, start_date=START, catchup=False):
    TensorFlowOnYarnOperator(task_id="train", cluster_requirement="worker:1", deferrable=True, task_memory="512",
                             command="python3 -c \"[print('short line', i) for i in range(3)]\"", poll_interval=10)

# issue #31: the same job in an image, through the operator (tests/e2e/test_docker_engine.py names both)
if os.environ.get("TONY_E2E_IMAGE"):
    with DAG("tony_in_image", schedule=None, start_date=START, catchup=False):
        TensorFlowOnYarnOperator(task_id="train", cluster_requirement="ps:1,worker:2", task_memory="1024",
                                 docker_image=os.environ["TONY_E2E_IMAGE"], env={"STAY": "ps"},
                                 output_path=os.environ["TONY_E2E_SEEN_DIR"], script=str(PAYLOADS / "in_image.py"),
                                 command="python3 ${DTF_TASK_SCRIPT}", poll_interval=1)
