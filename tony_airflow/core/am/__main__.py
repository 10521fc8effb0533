from tony_airflow.core.am.master import main

main()
