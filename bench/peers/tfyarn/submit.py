"""Submit a benchmark job with tf-yarn and wait for it, as its users do (`run_on_yarn`).

Run by `.venv-tfyarn`'s Python (tf-yarn 0.7.0, TensorFlow 2.15: tf-yarn needs tf.estimator);
prints the application id on its last line. `--task` names the module every container runs
(trivial_task.py, train_task.py, shipped beside this file); tf-yarn needs a chief, so the
trivial job's three tasks are chief:1, worker:1, ps:1. tf-yarn's client polls the application
every 10 s; `--poll` sets that interval (1 s, as ours and TonY's) so that the wall times compare.
tf-yarn gives the containers its client's own PEX_ROOT (a new `/tmp/<uuid4>` when it has none, ~1.8 GB
unpacked by every run and left there), whatever `env` says: `--pex-root` goes into this process's
environment.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pex", required=True, help="the packed environment, an hdfs:// URI (uploaded once)")
    parser.add_argument("--task", default="trivial_task", choices=["trivial_task", "train_task"])
    parser.add_argument("--types", default="chief,worker,ps", help="task types, one instance each")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for every container")
    parser.add_argument("--memory", type=int, default=512)
    parser.add_argument("--poll", type=int, default=1)
    parser.add_argument("--pex-root", required=True, help="where the containers unpack the pex (kept between runs)")
    args = parser.parse_args()

    from tf_yarn import client
    from tf_yarn.tensorflow import TaskSpec, run_on_yarn

    defaults = list(client._execute_and_await_termination.__defaults__ or ())
    defaults[-1] = args.poll  # poll_every_secs
    client._execute_and_await_termination.__defaults__ = tuple(defaults)
    found: list[str] = []

    class Ids(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            found.extend(re.findall(r"application_\d+_\d+", record.getMessage()))

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    logging.getLogger().addHandler(Ids())
    spec = {name: TaskSpec(memory=args.memory, vcores=1, instances=1) for name in args.types.split(",")}
    os.environ["PEX_ROOT"] = args.pex_root  # what tf-yarn's client hands to the containers
    # TMPDIR: the container's own tmp, as ours (TensorFlow's autograph writes there; /tmp otherwise)
    env = {"PYTHONPATH": ".", "TMPDIR": "tmp", **dict(kv.split("=", 1) for kv in args.env)}
    run_on_yarn(lambda: None, spec, pyenv_zip_path=args.pex, custom_task_module=args.task,
                files={f"{args.task}.py": str(HERE / f"{args.task}.py")}, env=env, name=f"bench-tfyarn-{args.task}")
    print(found[-1] if found else "no application id seen")


if __name__ == "__main__":
    main()
