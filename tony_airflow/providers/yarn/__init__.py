"""The Apache Airflow provider of tony-airflow: a training job as one node of a DAG.

Laid out like Airflow's official providers (hooks/, operators/, sensors/,
triggers/, links/, get_provider_info.py); everything here maps Airflow's
arguments onto the core's job spec and client and adds nothing of its own.
"""
