"""tf-yarn's side of the trivial benchmark job, run in each container as tf-yarn's custom task module.

It does what tf-yarn's own task does around the user's work: reserve a port and pass tf-yarn's
"init" barrier (every task registered, the cluster spec known), then the work (here: write the
time the task started it, as ours and TonY's tasks do), then tf-yarn's "stop" barrier. Run by
the pex's Python; no tony_airflow import.
"""

import os
import time

from tf_yarn import _internal
from tf_yarn.tensorflow.tasks.tf_task_common import _prepare_container, _shutdown_container


def main() -> None:
    with _internal.reserve_sock_addr() as host_port:
        client, _, cluster_tasks = _prepare_container(host_port)
    name = os.environ["SKEIN_CONTAINER_ID"].replace("_", "-")
    with open(os.path.join(os.environ["BENCH_STAMPS"], name), "w") as out:
        out.write(repr(time.time()))
    _shutdown_container(client, cluster_tasks, None, None)


if __name__ == "__main__":
    main()
