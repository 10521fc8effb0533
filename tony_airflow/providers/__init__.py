"""Adapters that plug the core into workflow schedulers (Apache Airflow)."""
