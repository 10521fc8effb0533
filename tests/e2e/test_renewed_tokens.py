"""A job longer than its delegation tokens live (issue #44 item 2), on a secure cluster of its own whose
NameNode gives tokens a renew interval of 60 s and a maximum lifetime of 3 min: submitted with a keytab,
the job writes to HDFS for 6 minutes and SUCCEEDS with every checkpoint there, its AM having obtained new
HDFS tokens from the keytab and handed them to its executor (core/am/token_renewal.py). The job runs in the
background from the session's start (tests/e2e/token_job.py); this test waits for it and checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import conftest
from tests.e2e.helpers import krb5_config, record
from tests.e2e.token_job import JOB_S, OUT, RENEW_INTERVAL_MS, STEP_S, LongTokenJob
from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.hdfs import webhdfs
from tony_airflow.yarn.kerberos import KerberosLogin

pytest.importorskip("gssapi")

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def long_token_job(tmp_path_factory: pytest.TempPathFactory):
    """The job started with the session (conftest.pytest_collection_finish), once it ended; its cluster is
    stopped after the test, and its realm is the test's while it checks (KRB5_CONFIG, put back after)."""
    job = conftest._TOKEN_JOB.get("job") or LongTokenJob(tmp_path_factory.mktemp("short-token-cluster")).start()
    assert isinstance(job, LongTokenJob)
    try:
        job.result(timeout=JOB_S + 1200)
        record("secure cluster with 60 s / 3 min tokens up (in the background)", job.up_s)
        with krb5_config(job.cluster.kdc.krb5_conf):
            yield job
    finally:
        job.down()
    assert not any(job.cluster.running().values()), job.cluster.running()


def _events(fs, app_id: str) -> list[dict]:
    text = fs.cat(f"/tmp/tony-history/{app_id}/events.jsonl").decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_a_job_longer_than_its_tokens_live_succeeds_with_new_tokens_from_its_keytab(long_token_job, tmp_path):
    job = long_token_job
    cluster, proc, started, ended = job.cluster, job.proc, job.started, job.ended
    principal, keytab = cluster.kdc.user_principal, str(cluster.kdc.user_keytab)
    env = cluster.env()
    out = OUT
    assert proc is not None and proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    app_id = next(w for w in (proc.stdout + proc.stderr).split() if w.startswith("application_"))
    fs = webhdfs(HadoopConf.load(cluster.conf_dir), login=KerberosLogin(principal, keytab))
    written = sorted(int(p.rsplit("-", 1)[1]) for p in fs.ls(out, detail=False) if p.rsplit("/", 1)[1].startswith("ckpt-"))
    assert written == list(range(JOB_S // STEP_S)), written  # every checkpoint the job wrote is in HDFS
    assert all(fs.cat(f"{out}/ckpt-{n}").decode() == str(n) for n in written)
    events = _events(fs, app_id)
    first = next(e for e in events if e["event"] == "TOKENS")
    assert first["renewable_until"] < ended - 60  # the job outlived its first token by more than a minute
    assert first["keytab"] is True
    obtained = [e for e in events if e["event"] == "TOKEN_OBTAINED"]
    # one at the start, then one every 45 s (75 % of the 60 s a token lives unless renewed)
    assert len(obtained) >= (ended - started) // (RENEW_INTERVAL_MS / 1000) , [e["time"] for e in obtained]
    assert all(b["time"] - a["time"] < RENEW_INTERVAL_MS / 1000 for a, b in zip(obtained, obtained[1:]))
    assert events[-1]["event"] == "JOB_FINISHED" and events[-1]["status"] == "SUCCEEDED"
    ticket = {**os.environ, **env, "KRB5CCNAME": f"FILE:{tmp_path / 'ccache'}"}
    subprocess.run(["kinit", "-kt", keytab, principal], env=ticket, check=True)
    show = subprocess.run([str(BIN / "tony"), "history", "show", app_id], env=ticket, capture_output=True,
                          text=True, timeout=120)
    assert "new ones come from the job's keytab before then" in show.stdout, show.stdout[:2000] + show.stderr
    assert f"{len(obtained)} new HDFS_DELEGATION_TOKEN(s) from the keytab" in show.stdout, show.stdout[:2000]
    # the timeline (artifacts/measurements.jsonl): the first token's end, then each new token, from submission
    record("60 s / 3 min tokens: the first HDFS token's max lifetime ends after submission",
           first["renewable_until"] - started)
    for n, e in enumerate(obtained, 1):
        record(f"60 s / 3 min tokens: new HDFS token {n} obtained after submission (good {e['expires'] - e['time']:.0f} s "
               "unless renewed)", e["time"] - started)
    record("60 s / 3 min tokens: the job ended after submission", ended - started)
    status = subprocess.run([str(BIN / "tony"), "status", app_id], env=ticket, capture_output=True, text=True,
                            timeout=120)
    assert "SUCCEEDED" in status.stdout, status.stdout + status.stderr  # ended: nothing of it runs
