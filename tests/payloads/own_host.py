"""Payload: every address a task is given is on the host it runs on, then the command given runs.

On a multi-host cluster each task must advertise its own NodeManager's host (NM_HOST),
hold its port there, and see its peers at theirs. Exits 1 on any inconsistency; else
prints one line `own-host OK <task> <host> <peers>` and execs the rest of its arguments.
"""

import json
import os
import socket
import sys

me, index = os.environ["DTF_TASK_JOB_NAME"], int(os.environ["DTF_TASK_INDEX"])
host = os.environ["NM_HOST"]
errors = []
own = os.environ["TONY_TASK_ADDRESS"]
if own.rsplit(":", 1)[0] != host:
    errors.append(f"TONY_TASK_ADDRESS {own} is not on NM_HOST {host}")
cluster = json.loads(os.environ["CLUSTER_SPEC"])
if cluster[me][index] != own:
    errors.append(f"CLUSTER_SPEC has {cluster[me][index]} for {me}:{index}, not {own}")
tf = json.loads(os.environ.get("TF_CONFIG") or '{"cluster": {}}')  # not for PyTorch
if tf["cluster"] and tf["cluster"][me][index] != own:
    errors.append(f"TF_CONFIG has {tf['cluster'][me][index]} for {me}:{index}, not {own}")
for job, addresses in cluster.items():
    if os.environ.get(f"DTF_{job.upper()}_HOSTS") != ",".join(addresses):
        errors.append(f"DTF_{job.upper()}_HOSTS disagrees with CLUSTER_SPEC")
if "MASTER_ADDR" in os.environ and os.environ["MASTER_ADDR"] != cluster["worker"][0].rsplit(":", 1)[0]:
    errors.append(f"MASTER_ADDR {os.environ['MASTER_ADDR']} is not the host of worker:0")
if "MASTER_ADDR" in os.environ:  # TonY's names for the same (issue #42 item 1)
    tony = (os.environ.get("INIT_METHOD"), os.environ.get("WORLD"))
    if tony != (f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", os.environ["WORLD_SIZE"]):
        errors.append(f"INIT_METHOD, WORLD {tony} disagree with MASTER_ADDR, MASTER_PORT, WORLD_SIZE")
with socket.socket() as sock:  # the address is one of this host's own: it can be bound here
    try:
        sock.bind((host, 0))
    except OSError as exc:
        errors.append(f"NM_HOST {host} is not an address of this host: {exc}")
port = int(own.rsplit(":", 1)[1])
with socket.socket() as sock:  # the executor holds the port on this host until the command binds it
    try:
        sock.bind(("0.0.0.0", port))
        errors.append(f"port {port} is not held on this host")
    except OSError:
        pass
if errors:
    print(f"own-host FAILED {me}:{index}: " + "; ".join(errors), file=sys.stderr, flush=True)
    sys.exit(1)
peers = ",".join(sorted(a for addrs in cluster.values() for a in addrs))
print(f"own-host OK {me}:{index} {host} {peers} MASTER_ADDR={os.environ.get('MASTER_ADDR', '')}", flush=True)
if len(sys.argv) > 1:
    os.execvp(sys.argv[1], sys.argv[1:])
