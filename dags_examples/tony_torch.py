"""PyTorch DDP under torchrun as one DAG node: two containers of two processes each (a world of 4).

The command is the torchrun command one would type by hand; the executors give torchrun its settings
(PET_*: the nodes, the processes per node, the rendezvous at the chief's container). The trained
checkpoint and metrics.json land in the output path on HDFS; `report` reads them back.
"""

from __future__ import annotations

import json

import pendulum
from airflow.sdk import dag, task

from tony_airflow.providers.yarn.operators.tensorflow import TensorFlowOnYarnOperator

# one output per DAG run (an HDFS path may not hold ':'), rendered for the operator and for `report` alike
OUTPUT = "hdfs:///tmp/tony-examples/digits-torch/{{ run_id | replace(':', '-') | replace('+', '-') }}"


@dag(dag_id="tony_torch", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False,
     tags=["tony-airflow", "example", "pytorch"], doc_md=__doc__)
def tony_torch():
    train = TensorFlowOnYarnOperator(
        task_id="train",
        framework="pytorch",
        cluster_requirement="worker:2",
        nproc_per_node=2,
        task_vcores="2",
        task_memory="3072",
        output_path=OUTPUT,
        command="torchrun -m tony_airflow.examples.digits_torch --epochs 4",
    )

    @task
    def report(output: str) -> dict:
        from tony_airflow.providers.yarn.hooks.yarn import YarnHook

        # the `yarn_default` connection's HDFS, as its principal on Kerberos
        metrics = json.loads(YarnHook().hdfs().cat(output.removeprefix("hdfs://") + "/metrics.json"))
        print(f"world size {metrics['world_size']}, test accuracy {metrics['test_accuracy']:.4f}")
        return {k: metrics[k] for k in ("world_size", "test_accuracy", "ranks")}

    train >> report(OUTPUT)


tony_torch()
