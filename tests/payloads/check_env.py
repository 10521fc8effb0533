"""Payload: checks the task environment of docs/ARCHITECTURE.md ("The task environment") and exits 1 on any inconsistency."""

import json
import os
import sys

errors = []
me, index = os.environ["DTF_TASK_JOB_NAME"], int(os.environ["DTF_TASK_INDEX"])
required = ["DTF_TASK_JOB_NAME", "DTF_TASK_INDEX", "JOB_NAME", "TASK_INDEX", "TASK_NUM", "IS_CHIEF",
            "CLUSTER_SPEC", "TONY_APPLICATION_ID", "TONY_ATTEMPT", "DTF_TASK_SCRIPT"]
if me != "tensorboard":
    required.append("TF_CONFIG")
errors += [f"missing {k}" for k in required if k not in os.environ]
cluster = json.loads(os.environ["CLUSTER_SPEC"])
own = os.environ["TONY_TASK_ADDRESS"]
for job, addrs in cluster.items():
    if os.environ.get(f"DTF_{job.upper()}_HOSTS") != ",".join(addrs):
        errors.append(f"DTF_{job.upper()}_HOSTS disagrees with CLUSTER_SPEC")
if cluster[me][index] != own:
    errors.append(f"own address {own} is not at {me}[{index}] of CLUSTER_SPEC")
if os.environ["DTF_" + me.upper() + "_HOSTS"].split(",")[index] != own:
    errors.append("own address not at own index in DTF_*_HOSTS")
tf = json.loads(os.environ["TF_CONFIG"])
if tf["task"] != {"type": me, "index": index} or tf["cluster"][me][index] != own:
    errors.append(f"TF_CONFIG inconsistent: {tf}")
if os.environ["JOB_NAME"] != me or os.environ["TASK_INDEX"] != str(index):
    errors.append("JOB_NAME/TASK_INDEX disagree with DTF_*")
if int(os.environ["TASK_NUM"]) != sum(len(v) for v in cluster.values()):
    errors.append("TASK_NUM is not the cluster size")
expected_chief = (me, index) == ("worker", 0)
if os.environ["IS_CHIEF"] != str(expected_chief).lower():
    errors.append(f"IS_CHIEF={os.environ['IS_CHIEF']} for {me}:{index}")
if os.environ.get("DTF_INPUT_PATH") != "/data/in" or os.environ.get("DTF_OUTPUT_PATH") != "/data/out":
    errors.append("DTF_INPUT_PATH/DTF_OUTPUT_PATH not passed")
if os.environ.get("MY_SETTING") != "42":
    errors.append("--env not passed")
import tempfile  # noqa: E402

# TensorFlow's autograph and the user's own temporary files go to the container's tmp directory,
# which YARN removes with the container, not to the host's /tmp
tmp = tempfile.gettempdir()
if os.environ["CONTAINER_ID"] not in tmp or os.path.basename(tmp) != "tmp":
    errors.append(f"temporary files go to {tmp}, not the container's tmp directory")
if errors:
    print(f"{me}:{index}: " + "; ".join(errors), file=sys.stderr)
    sys.exit(1)
print(f"{me}:{index} environment OK at {own}")
import time  # noqa: E402

if me == "ps":
    time.sleep(600)  # a ps serves until it is stopped
else:
    time.sleep(2)  # the workers' success ends the attempt: let the ps (started with them) print its line first
