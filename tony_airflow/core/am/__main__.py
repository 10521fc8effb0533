from tony_airflow.lean import lean_imports

lean_imports()  # the AM's own process: before anything imports skein

from tony_airflow.core.am.master import main  # noqa: E402

main()
