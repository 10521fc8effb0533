"""The example pipeline: prepare data into HDFS -> train on YARN -> evaluate -> report.

Training is one node of the DAG: `TensorFlowOnYarnOperator` runs the digits
example with MultiWorkerMirroredStrategy on two YARN workers plus a TensorBoard
task, reading the prepared data from HDFS and writing the model back to it. The
evaluate task loads that model from the output path in the Airflow worker.

    make demo     # runs this DAG with dag.test() on the local YARN + HDFS
"""

from __future__ import annotations

import re

import pendulum
from airflow.sdk import Asset, dag, task

from tony_airflow.providers.yarn.operators.tensorflow import TensorFlowOnYarnOperator

ROOT = "/tmp/tony-pipeline"  # HDFS directory of the runs
EPOCHS = 5
# The pipeline's trained model, as an Airflow asset: DAGs scheduled on it (tony_model_evaluation.py) run
# after each training; the event says where this run's model is and how it did.
MODEL = Asset(name="tony_pipeline_model", uri="hdfs:///tmp/tony-pipeline/model")


@dag(dag_id="tony_pipeline", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False,
     tags=["tony-airflow", "example"], doc_md=__doc__)
def tony_pipeline():
    @task
    def prepare(run_id: str | None = None) -> dict[str, str]:
        """Write the train/test split as .npz into a fresh HDFS directory of this run."""
        from tony_airflow.examples.pipeline_steps import prepare as prepare_data
        from tony_airflow.providers.yarn.hooks.yarn import YarnHook

        return prepare_data(f"{ROOT}/{re.sub(r'[^A-Za-z0-9_.-]', '_', run_id or 'manual')}", YarnHook().hdfs())

    paths = prepare()

    train = TensorFlowOnYarnOperator(
        task_id="train",
        cluster_requirement="worker:2",
        task_memory="1536",
        command=f"python3 -m tony_airflow.examples.digits_keras --epochs {EPOCHS}",
        input_path="{{ ti.xcom_pull(task_ids='prepare')['input'] }}",
        output_path="{{ ti.xcom_pull(task_ids='prepare')['output'] }}",
        tensorboard=True,
        application_name="tony-pipeline",
        poll_interval=2.0,
        outlets=[MODEL],  # each success is an asset event: application id, final status, metrics.json
    )

    @task
    def evaluate(paths: dict[str, str]) -> dict[str, float]:
        """Load the trained model from the output path and score it on the held-out split."""
        from tony_airflow.examples.pipeline_steps import evaluate as evaluate_model
        from tony_airflow.providers.yarn.hooks.yarn import YarnHook

        # the `yarn_default` connection's HDFS, as its principal on Kerberos
        return evaluate_model(paths["input"], paths["output"], YarnHook().hdfs())

    @task
    def report(scores: dict[str, float], ti=None) -> dict[str, str]:
        """One summary a human reads: where the job ran, where its TensorBoard was, how good the model is."""
        summary = {key: ti.xcom_pull(task_ids="train", key=key)
                   for key in ("application_id", "final_status", "tracking_url", "tensorboard_url")}
        summary["accuracy"] = f"{scores['accuracy']:.4f}"
        for key, value in summary.items():
            print(f"{key:>16}: {value}")
        return summary

    scores = evaluate(paths)
    paths >> train >> scores
    report(scores)


tony_pipeline()
