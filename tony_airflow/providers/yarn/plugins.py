"""The provider's Airflow plugin: its listeners, loaded through the `airflow.plugins` entry point
(provider plugins load lazily; the API server must have this one when a user marks a task)."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from tony_airflow.providers.yarn.listeners import deferred_kill


class YarnPlugin(AirflowPlugin):
    name = "tony_airflow_yarn"
    listeners = [deferred_kill]
