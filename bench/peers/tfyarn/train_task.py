"""tf-yarn's side of the training benchmark, run in each container as tf-yarn's custom task module.

The same program as ours, TonY's and the hand launch (tony_airflow.examples.digits_keras, found
through PYTHONPATH: one host) between tf-yarn's init and stop barriers, with the TF_CONFIG
tf-yarn builds from its cluster spec; BENCH_TRAIN_ARGS holds the program's arguments.
"""

import os
import sys

from tf_yarn import _internal
from tf_yarn.tensorflow import cluster
from tf_yarn.tensorflow.tasks.tf_task_common import _prepare_container, _shutdown_container


def main() -> None:
    with _internal.reserve_sock_addr() as host_port:
        client, cluster_spec, cluster_tasks = _prepare_container(host_port)
        cluster.setup_tf_config(cluster_spec)
    from tony_airflow.examples import digits_keras

    sys.argv = ["digits_keras", *os.environ["BENCH_TRAIN_ARGS"].split()]
    digits_keras.main()
    _shutdown_container(client, cluster_tasks, None, None)


if __name__ == "__main__":
    main()
