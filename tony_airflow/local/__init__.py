"""What the project stands up on this machine for you, apart from the product it tests.

- `cluster`: the local Hadoop cluster of `tony cluster up` (its daemons and generated configuration, the
  KDC of `--secure`, the network-namespace hosts of `--nodes`, the HA pairs of `--ha`, the Oozie server of
  `tony oozie server`);
- `containers`: the node's container engines (dockerd started safely, `tony image build`).

The product — the client, the AM, the executors and their front ends — never imports it: it talks to
whatever cluster HADOOP_CONF_DIR names, this one only by default (docs/operating/).
"""
