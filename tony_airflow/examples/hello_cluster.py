"""A tiny distributed program: every task prints who it is and who its peers are.

Runs unchanged under ytf-submit: it only reads the task environment.
"""

import json
import os
import time

me = f"{os.environ['DTF_TASK_JOB_NAME']}:{os.environ['DTF_TASK_INDEX']}"
cluster = json.loads(os.environ["CLUSTER_SPEC"])
print(f"{me} (attempt {os.environ['TONY_ATTEMPT']}) listens on {os.environ['TONY_TASK_ADDRESS']}")
print(f"{me} sees the cluster {cluster}")
print(f"{me} TF_CONFIG={os.environ.get('TF_CONFIG')}")
if os.environ["DTF_TASK_JOB_NAME"] == "ps":
    time.sleep(3600)  # a parameter server serves until the AM stops it
