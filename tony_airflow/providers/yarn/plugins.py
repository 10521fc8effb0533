"""The provider's Airflow plugin, loaded through the `airflow.plugins` entry point (provider plugins load
lazily; the API server must have this one when a user marks a task or opens a past try's links).

- listeners: the deferred task's application is killed when a user marks the task failed;
- operator_extra_links: the operator's links as their own classes in the API server, so a past try's
  links lead to that try's application (Airflow's plain XCom lookup knows no tries).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from tony_airflow.providers.yarn.links.yarn import TensorBoardLink, YarnApplicationLink
from tony_airflow.providers.yarn.listeners import deferred_kill
from tony_airflow.providers.yarn.operators.tensorflow import TensorFlowOnYarnOperator

# Airflow matches a plugin's link to a task by these classes (the links' own classes: their xcom_key, named
# after the class, stays what the operator writes)
YarnApplicationLink.operators = [TensorFlowOnYarnOperator]
TensorBoardLink.operators = [TensorFlowOnYarnOperator]


class YarnPlugin(AirflowPlugin):
    name = "tony_airflow_yarn"
    listeners = [deferred_kill]
    operator_extra_links = [YarnApplicationLink(), TensorBoardLink()]
