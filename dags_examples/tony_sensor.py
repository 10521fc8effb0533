"""Submit without waiting, then wait with `YarnApplicationSensor`.

The pattern for long jobs when no triggerer is running: the submitting task
returns as soon as YARN accepted the application, and the sensor, in
reschedule mode, frees its worker slot between pokes.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import dag, task

from tony_airflow.providers.yarn.operators.tensorflow import TensorFlowOnYarnOperator
from tony_airflow.providers.yarn.sensors.yarn import YarnApplicationSensor


@dag(dag_id="tony_sensor", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False,
     tags=["tony-airflow", "example"], doc_md=__doc__)
def tony_sensor():
    submit = TensorFlowOnYarnOperator(
        task_id="submit",
        cluster_requirement="ps:1,worker:2",
        task_memory="512",
        command="python3 -m tony_airflow.examples.hello_cluster",
        wait_for_completion=False,
    )
    wait = YarnApplicationSensor(
        task_id="wait",
        application_id="{{ ti.xcom_pull(task_ids='submit') }}",
        mode="reschedule",
        poke_interval=3,
        timeout=600,
    )

    @task
    def report(ti=None) -> str:
        app_id = ti.xcom_pull(task_ids="wait")
        print(f"{app_id} SUCCEEDED; tracking URL {ti.xcom_pull(task_ids='submit', key='tracking_url')}")
        return app_id

    submit >> wait >> report()


tony_sensor()
