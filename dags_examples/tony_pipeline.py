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
from airflow.sdk import dag, task

from tony_airflow.providers.yarn.operators.tensorflow import TensorFlowOnYarnOperator

ROOT = "/tmp/tony-pipeline"  # HDFS directory of the runs
EPOCHS = 5


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
    )

    @task
    def evaluate(paths: dict[str, str]) -> dict[str, float]:
        """Load the trained model from the output path and score it on the held-out split."""
        import os
        import tempfile

        os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
        import numpy as np
        import tf_keras as keras

        from tony_airflow.providers.yarn.hooks.yarn import YarnHook
        from tony_airflow.yarn.hdfs import hdfs_path

        fs = YarnHook().hdfs()  # the `yarn_default` connection's HDFS, as its principal on Kerberos
        with tempfile.TemporaryDirectory() as local:
            fs.get(f"{hdfs_path(paths['output'])}/model.keras", f"{local}/model.keras")
            fs.get(f"{hdfs_path(paths['input'])}/digits_test.npz", f"{local}/test.npz")
            model = keras.models.load_model(f"{local}/model.keras")
            data = np.load(f"{local}/test.npz")
            predicted = np.argmax(model.predict(data["x"], verbose=0), axis=1)
        accuracy = float((predicted == data["y"]).mean())
        print(f"evaluated {paths['output']}/model.keras on {len(data['y'])} held-out digits: accuracy {accuracy:.4f}")
        return {"accuracy": accuracy, "examples": int(len(data["y"]))}

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
