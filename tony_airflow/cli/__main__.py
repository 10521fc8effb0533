"""`python -m tony_airflow.cli` is `tony`."""

from tony_airflow.cli.tony import main

main()
