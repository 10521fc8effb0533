"""What Airflow's providers manager reads through the `apache_airflow_provider` entry point."""

from __future__ import annotations

from typing import Any

from tony_airflow.providers.yarn.connection import CONN_FIELDS, UI_FIELD_BEHAVIOUR

PACKAGE = "tony_airflow.providers.yarn"


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "tony-airflow",
        "name": "Training on YARN (tony-airflow)",
        "description": "Distributed training (TensorFlow, PyTorch or any command) on Apache Hadoop YARN as a node "
                       "of an Airflow DAG.",
        "integrations": [{"integration-name": "Hadoop YARN (tony-airflow)",
                          "external-doc-url": "https://hadoop.apache.org/docs/stable/hadoop-yarn/hadoop-yarn-site/",
                          "tags": ["apache"]}],
        "hooks": [{"integration-name": "Hadoop YARN (tony-airflow)", "python-modules": [f"{PACKAGE}.hooks.yarn"]}],
        "operators": [{"integration-name": "Hadoop YARN (tony-airflow)",
                       "python-modules": [f"{PACKAGE}.operators.tensorflow"]}],
        "sensors": [{"integration-name": "Hadoop YARN (tony-airflow)", "python-modules": [f"{PACKAGE}.sensors.yarn"]}],
        "triggers": [{"integration-name": "Hadoop YARN (tony-airflow)",
                      "python-modules": [f"{PACKAGE}.triggers.yarn"]}],
        "connection-types": [{"connection-type": "yarn", "hook-class-name": f"{PACKAGE}.hooks.yarn.YarnHook",
                              "hook-name": "Hadoop YARN (tony-airflow)",
                              "conn-fields": CONN_FIELDS, "ui-field-behaviour": UI_FIELD_BEHAVIOUR}],
        "extra-links": [f"{PACKAGE}.links.yarn.YarnApplicationLink", f"{PACKAGE}.links.yarn.TensorBoardLink"],
    }
