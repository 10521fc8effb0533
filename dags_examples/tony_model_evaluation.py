"""Scheduled on the pipeline's model asset: evaluates each newly trained model.

`tony_pipeline`'s train task declares the asset `tony_pipeline_model` as its
outlet; every successful training emits an asset event whose extra holds the
YARN application id, its final status, the run's output (model) and input
paths, and the metrics the training wrote (metrics.json). This DAG runs after
each such event and scores the model that event names.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import Asset, dag, task

MODEL = Asset(name="tony_pipeline_model", uri="hdfs:///tmp/tony-pipeline/model")


@dag(dag_id="tony_model_evaluation", schedule=[MODEL], start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
     catchup=False, tags=["tony-airflow", "example"], doc_md=__doc__)
def tony_model_evaluation():
    @task
    def evaluate(triggering_asset_events=None) -> dict:
        """Score the model of the newest event (its application id and training metrics are kept with it)."""
        from tony_airflow.examples.pipeline_steps import evaluate as evaluate_model
        from tony_airflow.providers.yarn.hooks.yarn import YarnHook

        event = triggering_asset_events[MODEL][-1]
        extra = dict(event.extra or {})
        print(f"model of {extra.get('application_id')} ({extra.get('final_status')}), "
              f"training metrics {extra.get('metrics')}")
        scores = evaluate_model(extra["input_path"], extra["output_path"], YarnHook().hdfs())
        return {**scores, "application_id": extra.get("application_id"),
                "training_metrics": extra.get("metrics") or {}}

    evaluate()


tony_model_evaluation()
