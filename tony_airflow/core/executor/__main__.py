import os

from tony_airflow.lean import lean_imports

lean_imports()  # the executor's own process, and its lookup child: before anything imports skein

from tony_airflow.core.executor.container_life import end_with_the_container  # noqa: E402

end_with_the_container(os.environ)  # never outlive the container: YARN removes its directory then

from tony_airflow.core.executor.boot import start_lookup  # noqa: E402

lookup = start_lookup(os.environ)  # attempt 1: learnt in a child while this process imports the executor

from tony_airflow.core.executor.task import main  # noqa: E402

main(lookup)
