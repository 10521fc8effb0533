import os

from tony_airflow.core.executor.boot import start_lookup

lookup = start_lookup(os.environ)  # attempt 1: learnt in a child while this process imports the executor

from tony_airflow.core.executor.task import main  # noqa: E402

main(lookup)
