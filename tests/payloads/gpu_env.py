"""Payload: prints where the task runs and which GPUs it may use."""
import os

print(f"{os.environ['DTF_TASK_JOB_NAME']}:{os.environ['DTF_TASK_INDEX']} nm_port={os.environ['NM_PORT']} "
      f"cuda={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}")
if os.environ["DTF_TASK_JOB_NAME"] == "ps":
    import time
    time.sleep(600)
