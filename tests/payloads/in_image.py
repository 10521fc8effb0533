"""Payload: where does this task run? Writes what it sees to $DTF_OUTPUT_PATH/<type>-<index>.json.

Binds its reserved port (as TensorFlow's gRPC server does: SO_REUSEADDR) and listens; a type named in
STAY (the ps) then stays until it is stopped.
"""
import json
import os
import socket
import sys
import time

me = f"{os.environ['DTF_TASK_JOB_NAME']}-{os.environ['DTF_TASK_INDEX']}"
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("", int(os.environ["TONY_TASK_PORT"])))
server.listen()
marker = "/etc/tony-airflow-image"
seen = {
    "marker": open(marker).read() if os.path.exists(marker) else None,
    "python": sys.executable,
    "uid": os.getuid(),
    "cwd": os.getcwd(),
    "env": {k: v for k, v in os.environ.items() if k.startswith(("DTF_", "TONY_", "TF_CONFIG", "CLUSTER_SPEC"))},
    "hadoop_conf": sorted(os.listdir(os.environ["HADOOP_CONF_DIR"])),
    "port": server.getsockname()[1],
    "home": os.environ.get("HOME"),
    "path_has_venv": ".venv" in os.environ.get("PATH", ""),
}
path = os.path.join(os.environ["DTF_OUTPUT_PATH"], f"{me}.json")
with open(path + ".tmp", "w") as out:
    json.dump(seen, out)
os.replace(path + ".tmp", path)
print(f"{me} ran in {seen['marker']!r}", flush=True)
if os.environ["DTF_TASK_JOB_NAME"] == os.environ.get("STAY"):
    while True:
        time.sleep(1)
