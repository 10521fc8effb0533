"""Payload: the chief runs in the submitting process, the workers in YARN containers."""
import json
import os

me = f"{os.environ['DTF_TASK_JOB_NAME']}:{os.environ['DTF_TASK_INDEX']}"
tf = json.loads(os.environ["TF_CONFIG"])
assert sorted(tf["cluster"]) == ["chief", "worker"] and len(tf["cluster"]["worker"]) == 2, tf
where = "container" if "CONTAINER_ID" in os.environ else "client"
print(f"{me} runs in the {where} (pid {os.getpid()}, parent {os.getppid()}) attempt {os.environ['TONY_ATTEMPT']}")
