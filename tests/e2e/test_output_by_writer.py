"""The output published by what its writer finished, not by the clock (issue #50), on the real cluster.

A save reaches HDFS while the program runs however often it saves (a model rewritten in place every second,
a pointer-last trainer saving every 0.4 s, an elastic torchrun job, a docker task writing through its bind
mount); a file its writer holds open, paused, is never published half-written; the final push publishes
everything (300 files), and what it cannot publish fails the task with the output's exit code, naming the file.
The payloads record the steps they saved and the step they resumed from: the tests count saves, never seconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import subprocess
import time

import pytest

from bench import torch_elastic
from tests.e2e.conftest import BUSYBOX
from tests.e2e.helpers import BIN, PAYLOADS, aggregated_logs, fresh_hdfs_dir, job_events, record, ytf_submit
from tony_airflow.core.executor.output_protocol import MARK_PREFIX
from tony_airflow.core.executor.task import OUTPUT_NOT_PUBLISHED
from tony_airflow.yarn.hdfs import is_part, webhdfs

LOOKS = 240  # x 0.5 s: how long a test looks for a file in HDFS while its job runs
EPOCHS = 150  # the elastic job's: rank 0 saves after each, a few tenths of a second apart




def _last_saved(app_id: str, pattern: str) -> int:
    """The save the failed attempt 1 named in its last stderr line (the job's history keeps the tail)."""
    tails = [e.get("stderr_tail", "") for e in job_events(app_id)
             if e["event"] == "TASK_FINISHED" and e["attempt"] == 1]
    found = [int(m.group(1)) for tail in tails for m in re.finditer(pattern, tail)]
    assert found, tails
    return max(found)


def _popen_submit(*args: str) -> tuple[subprocess.Popen, str]:
    submit = subprocess.Popen([str(BIN / "ytf-submit"), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    first = submit.stdout.readline() if submit.stdout else ""
    if not first.startswith("Submitted application"):
        rest = submit.communicate()
        raise AssertionError(f"ytf-submit exited {submit.returncode} before submitting: {first}{rest[1][-2000:]}")
    return submit, first.split()[-1]


def _end(submit: subprocess.Popen, app_id: str, timeout: float = 600) -> tuple[str, str]:
    """Wait for ytf-submit; the job is killed if it does not end."""
    try:
        return submit.communicate(timeout=timeout)
    finally:
        _kill(submit, app_id)


def _kill(submit: subprocess.Popen, app_id: str) -> None:
    """A job a test left running (it failed first): killed, with its ytf-submit."""
    if submit.poll() is None:
        subprocess.run([str(BIN / "tony"), "kill", app_id], capture_output=True, timeout=120)
        submit.kill()
        submit.communicate()


def _while_running(submit: subprocess.Popen, path: str) -> bool:
    """Whether `path` appeared in HDFS while ytf-submit (the job) still ran; counted looks."""
    fs = webhdfs()
    for _ in range(LOOKS):
        if submit.poll() is not None:
            return False
        if fs.exists(path):
            return True
        time.sleep(0.5)
    return False


def test_a_48_mib_model_rewritten_in_place_every_second_resumes_within_3_steps_of_the_last_save(local_cluster, rm):
    """Keras-style: 48 MiB truncated and rewritten in place, one rewrite starting every 0.9 s (never left
    alone for the old quiet time); attempt 1 fails by itself after 21 s, right after a rewrite. Attempt 2
    restores a whole model, at most 3 steps behind the last one attempt 1 closed."""
    out = "/tmp/e2e/obw-rewrite-in-place"
    fresh_hdfs_dir(out)
    proc, app_id = ytf_submit(
        "-r", "chief:1", "-m", "512", "--max-attempts", "2", "-o", f"hdfs://{out}",
        "--env", "RUN_S=21", "--env", "PERIOD_S=0.9",
        "-s", str(PAYLOADS / "rewrite_each_second.py"), "python3 ${DTF_TASK_SCRIPT}", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "SUCCEEDED on attempt 2/2" in rm.application(app_id).diagnostics
    last = _last_saved(app_id, r"failing right after writing step (\d+)")
    attempt, resumed = webhdfs().cat(f"{out}/resumed.txt").decode().split()
    record("output-by-writer: 48 MiB in place each 0.9 s -> steps attempt 2 lost", float(last - int(resumed)))
    assert attempt == "2" and last - int(resumed) <= 3, f"attempt 1 saved step {last}; attempt 2 resumed from {resumed}"


def test_a_pointer_last_trainer_saving_every_0_4_s_resumes_within_3_s_of_training(local_cluster, rm):
    """Data, index, then the `checkpoint` pointer by rename (as TensorFlow saves), every 0.4 s; attempt 1
    fails by itself after 24 s, right after a save. Attempt 2 resumes from a checkpoint of one save at most
    7 saves (2.8 s of training) behind attempt 1's last."""
    out = "/tmp/e2e/obw-pointer-every-0.4s"
    fresh_hdfs_dir(out)
    proc, app_id = ytf_submit(
        "-r", "chief:1", "-m", "256", "--max-attempts", "2", "-o", f"hdfs://{out}",
        "--env", "STEPS=80", "--env", "STEP_S=0.4", "--env", "FAIL_AFTER_S=24",
        "-s", str(PAYLOADS / "pointer_trainer.py"), "python3 ${DTF_TASK_SCRIPT}", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "SUCCEEDED on attempt 2/2" in rm.application(app_id).diagnostics
    last = _last_saved(app_id, r"failing right after saving ckpt-(\d+)")
    metrics = json.loads(webhdfs().cat(f"{out}/metrics.json"))
    assert metrics["attempt"] == 2, metrics
    resumed = metrics["resumed_from"]
    record("output-by-writer: saves every 0.4 s -> saves attempt 2 lost", float(last - (resumed or -1)))
    assert resumed is not None and last - resumed <= 7, f"attempt 1 saved ckpt-{last}; attempt 2 resumed from {resumed}"


def test_a_writer_paused_mid_file_is_never_restored_half_written(local_cluster, rm):
    """The chief rewrites model.bin in place, pausing 3 s with the file open after writing half of it; the
    worker fails attempt 1 while the chief is paused. Attempt 2 restores a whole version (each carries its
    length and SHA-256) of a step attempt 1 closed, never the half, and HDFS ends with attempt 2's whole one."""
    out = "/tmp/e2e/obw-paused-writer"
    fresh_hdfs_dir(out)
    proc, app_id = ytf_submit(
        "-r", "chief:1,worker:1", "-m", "256", "--tracked", "chief", "--untracked", "worker", "--max-attempts", "2",
        "-o", f"hdfs://{out}", "--env", "VERSIONS=4", "--env", "PAUSE_S=3", "--env", "FAIL_AFTER_S=22",
        "-s", str(PAYLOADS / "pausing_writer.py"), "python3 ${DTF_TASK_SCRIPT}", timeout=600)
    diagnostics = rm.application(app_id).diagnostics if app_id else ""
    assert proc.returncode == 0, diagnostics + proc.stderr[-3000:]
    assert "SUCCEEDED on attempt 2/2" in diagnostics and "worker:0 exited early with code 3" in diagnostics, \
        diagnostics
    fs = webhdfs()
    restored = json.loads(fs.cat(f"{out}/restored.json"))
    assert restored["attempt"] == 2 and 1 <= restored["restored_step"] <= 4, restored
    data = fs.cat(f"{out}/model.bin")
    assert int.from_bytes(data[:8], "big") == len(data) and hashlib.sha256(data[:-32]).digest() == data[-32:]
    assert int.from_bytes(data[8:16], "big") == 1000 + restored["restored_step"]


def test_300_files_written_just_before_exit_0_are_all_in_hdfs(local_cluster, rm):
    """300 shards, then `_SUCCESS`, then exit 0 at once: the final push publishes all 301 and the job SUCCEEDS."""
    out = "/tmp/e2e/obw-300-files"
    fresh_hdfs_dir(out)
    proc, app_id = ytf_submit(
        "-r", "chief:1", "-m", "256", "-o", f"hdfs://{out}", "--env", "COUNT=300",
        "-s", str(PAYLOADS / "files_at_exit.py"), "python3 ${DTF_TASK_SCRIPT}", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    fs = webhdfs()
    shards = sorted(p.rsplit("/", 1)[1] for p in fs.find(f"{out}/shards") if not is_part(p))
    success = fs.exists(f"{out}/_SUCCESS")
    assert (len(shards), success) == (300, True), f"HDFS holds {len(shards)} of 300 shards, _SUCCESS: {success}"
    assert shards == [f"part-{n:05d}" for n in range(300)]
    assert fs.cat(f"{out}/shards/part-00299").decode() == "part-00299\n"


def test_hdfs_full_during_the_final_push_fails_the_task_with_the_outputs_code_naming_the_file(local_cluster, rm):
    """A space quota on the output directory, set while the program runs, too small for the 2 MiB model.bin
    it writes just before exit 0: the task fails with the output's exit code (74) and the job's failure line
    names model.bin. The quota is cleared after."""
    out = "/tmp/e2e/obw-quota"
    fresh_hdfs_dir(out)
    hdfs = str(local_cluster.bin_dir / "hdfs")
    submit, app_id = _popen_submit(
        "-r", "chief:1", "-m", "256", "-o", f"hdfs://{out}", "--env", "COUNT=0", "--env", "LAST_KB=2048",
        "--env", "WAIT_S=20", "-s", str(PAYLOADS / "files_at_exit.py"), "python3 ${DTF_TASK_SCRIPT}")
    fs = webhdfs()
    try:
        claimed = False
        for _ in range(LOOKS):  # the chief's claim (its mark) is in HDFS: the program is about to start
            claimed = fs.exists(out) and any(p.rsplit("/", 1)[1].startswith(MARK_PREFIX) for p in fs.find(out))
            if claimed or submit.poll() is not None:
                break
            time.sleep(0.5)
        assert claimed, "the chief never claimed the output"
        subprocess.run([hdfs, "dfsadmin", "-setSpaceQuota", "1m", out], check=True, capture_output=True, timeout=120)
        assert rm.application(app_id).state == "RUNNING", "the job ended before the quota was set"
        stdout, stderr = _end(submit, app_id)
    finally:
        subprocess.run([hdfs, "dfsadmin", "-clrSpaceQuota", out], capture_output=True, timeout=120)
    assert submit.returncode != 0, stdout[-2000:]
    diagnostics = rm.application(app_id).diagnostics
    line = next((ln for ln in diagnostics.splitlines() if f"exited with code {OUTPUT_NOT_PUBLISHED}" in ln), "")
    assert line, diagnostics
    record_line = line.split("stderr: ", 1)[-1]
    assert re.search(r"model\.bin(?![.\w-])", record_line), line  # the file itself, not only its temporary name
    print(f"the job's failure line: {line}")


def test_an_elastic_torchrun_job_that_loses_rank_0s_container_resumes_from_its_checkpoint(local_cluster, rm):
    """`--elastic 2:2`, rank 0 (worker:0's container) saving `checkpoint.pt` by tmp + rename every epoch, a
    few tenths of a second apart. Once a checkpoint is in HDFS while the training still runs, every process of
    rank 0's container is SIGKILLed. The rendezvous is the AM's (issue 51): worker:1's container and its
    torchrun agent (the same process) stay, the AM replaces worker:0, the agents form a new round, the job
    SUCCEEDS in its one attempt (one YARN attempt), and the training resumes from that checkpoint or a later
    one (resumed_at_epoch > the epoch HDFS held at the kill), never from epoch 0.
    The output's writer moves with rank 0 (issue 51 item 5): the survivor is rank 0 of every later round and
    takes the writer role (WRITER_MOVED, its claim the newest mark), worker:0's replacement does not claim,
    and the survivor's saves reach HDFS while the job runs (the checkpoint there passes the epoch at the kill
    before metrics.json is written)."""
    torch = pytest.importorskip("torch")
    from tony_airflow.core.executor.torchrun_rendezvous import ROUND_LINE

    out = "/tmp/e2e/obw-elastic-rank0"
    fresh_hdfs_dir(out)
    submit, app_id = _popen_submit(
        "-r", "worker:2", "--framework", "pytorch", "--elastic", "2:2", "--max-attempts", "2", "-m", "2048",
        "-o", f"hdfs://{out}", "-n", "obw-elastic-rank0",
        f"torchrun -m tony_airflow.examples.digits_torch --epochs {EPOCHS} --steps-per-epoch 1 --sleep-per-epoch 0.1")
    fs = webhdfs()
    try:
        seen = _while_running(submit, f"{out}/checkpoint.pt")
        training = seen and not fs.exists(f"{out}/metrics.json")
        assert seen and training, ("rank 0's checkpoint reached HDFS only with the training's end"
                                   if seen or submit.poll() is not None else "rank 0's checkpoint never reached HDFS")
        held = torch.load(io.BytesIO(fs.cat(f"{out}/checkpoint.pt")), weights_only=True)["epoch"]
        assert held < EPOCHS // 2, f"rank 0's checkpoint reached HDFS only at epoch {held} of {EPOCHS}"
        survivor, _ = torch_elastic.task_processes(app_id, "worker", 1)
        killed, processes = torch_elastic.task_processes(app_id, "worker", 0)
        torch_elastic.kill_all(processes)
        advanced = held
        for _ in range(LOOKS * 2):  # the new rank 0's saves reach HDFS while the training runs
            if submit.poll() is not None or fs.exists(f"{out}/metrics.json"):
                break
            with contextlib.suppress(FileNotFoundError, EOFError, RuntimeError):  # replaced between two calls
                advanced = torch.load(io.BytesIO(fs.cat(f"{out}/checkpoint.pt")), weights_only=True)["epoch"]
            if advanced > held + 2:
                break
            time.sleep(0.5)
        stdout, stderr = _end(submit, app_id)
    finally:
        _kill(submit, app_id)
    assert submit.returncode == 0, stderr[-3000:]
    report = rm.application(app_id)
    assert report.final_status == "SUCCEEDED", report.diagnostics
    attempts = rm.get(f"/ws/v1/cluster/apps/{app_id}/appattempts")["appAttempts"]["appAttempt"]
    assert len(attempts) == 1, attempts  # one AM: the job was never restarted by YARN
    events = job_events(app_id)
    assert [e["attempt"] for e in events if e["event"] == "ATTEMPT_STARTED"] == [1], events
    registered = {}
    for e in events:
        if e["event"] == "TASK_REGISTERED":
            registered.setdefault(e["task"], []).append(e["container_id"])
    assert registered["worker:1"] == [survivor], registered  # the survivor kept its container
    assert len(registered["worker:0"]) == 2 and registered["worker:0"][0] == killed, registered
    assert any(e["event"] == "WORKER_REPLACED" and e["task"] == "worker:0" for e in events), events
    # worker:1's torchrun agent (the same process: its node name holds its pid) went through two rounds
    logs = aggregated_logs(rm, app_id)
    rounds = [line.split(ROUND_LINE, 1)[1] for line in logs.splitlines() if ROUND_LINE in line]
    survivor_rounds = [r for r in rounds if f"@{survivor}#" in r]
    assert len(survivor_rounds) >= 2 and len({r.split("(node ")[1] for r in survivor_rounds}) == 1, rounds
    metrics = json.loads(fs.cat(f"{out}/metrics.json"))
    record("output-by-writer: elastic rank 0 killed -> epochs lost", float(held + 1 - metrics["resumed_at_epoch"]))
    print(f"HDFS held epoch {held} at the kill; resumed at {metrics['resumed_at_epoch']}; the slowest epoch after it "
          f"took {max(metrics['epoch_seconds'] or [0]):.2f} s + 0.1 s of sleep; rounds: {rounds}")
    assert metrics["resumed_at_epoch"] > held, f"HDFS held epoch {held} at the kill; resumed at {metrics}"
    assert metrics["world_size"] == 2, metrics
    # the writer role went with rank 0 to the survivor, once; its saves reached HDFS before the training's end
    moved = [e for e in events if e["event"] == "WRITER_MOVED"]
    assert [(e["task"], e["container_id"], e["from_task"], e["from_container"]) for e in moved] == [
        ("worker:1", survivor, "worker:0", killed)], moved
    assert all("rank 0 of 2" in r for r in survivor_rounds[1:]), rounds
    assert advanced > held + 2, f"HDFS held epoch {held} at the kill and only {advanced} before the training's end"
    marks = sorted(p for p in fs.find(out) if p.rsplit("/", 1)[1].startswith(MARK_PREFIX))
    newest = fs.cat(marks[-1]).decode().split()
    assert newest[:2] == [app_id, "1"] and newest[2].endswith(".worker1." + survivor.rsplit("_", 1)[-1]), marks
    print(f"the writer moved: {moved[0]['line']}; HDFS's checkpoint at epoch {advanced} while the job ran")


def test_a_docker_task_saving_every_0_4_s_through_the_bind_mount_reaches_hdfs_while_it_runs(
        local_cluster, rm, small_images):
    """A busybox task rewrites `ckpt` (its step inside) through the output's bind mount every 0.4 s for
    about 30 s: the executor, watching the host side, publishes a save while the task still runs."""
    out = "/tmp/e2e/obw-docker"
    fresh_hdfs_dir(out)
    command = ('n=0; while [ $n -lt 75 ]; do n=$((n+1)); '
               '{ echo "step $n"; head -c 262144 /dev/zero; } > "$DTF_OUTPUT_PATH/ckpt"; sleep 0.4; done')
    submit, app_id = _popen_submit("-r", "worker:1", "-m", "256", "--docker_image", BUSYBOX, "-o", f"hdfs://{out}",
                                   "-n", "obw-docker", command)
    fs = webhdfs()
    try:
        seen = _while_running(submit, f"{out}/ckpt")
        step = fs.cat(f"{out}/ckpt")[:12].decode(errors="replace").split("\n")[0] if seen else ""
    finally:
        stdout, stderr = _end(submit, app_id)
    assert submit.returncode == 0, stdout[-3000:] + stderr[-3000:]
    assert seen, "the checkpoint reached HDFS only after the task ended"
    assert step.startswith("step ") and int(step.split()[1]) < 75, \
        f"the first save HDFS held while the job ran was its last one ({step!r}), from the final push"
    assert fs.cat(f"{out}/ckpt").startswith(b"step 75\n")
