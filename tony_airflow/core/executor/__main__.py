from tony_airflow.core.executor.task import main

main()
