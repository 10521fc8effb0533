"""The job of test_renewed_tokens.py, in the background from the session's start: a secure cluster of its own
whose NameNode gives tokens a renew interval of 60 s and a maximum lifetime of 3 min, and a job that writes
to HDFS for 6 minutes, submitted with a keytab. The job mostly sleeps, so its 6 minutes pass beside the
other tests instead of after them; the test waits for it and checks what it left. Everything here runs
in child processes with the cluster's environment: the session's own (its KRB5_CONFIG) is left alone."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.e2e.helpers import PAYLOADS
from tony_airflow.local.cluster import LocalCluster
from tony_airflow.local.cluster.config import ClusterSettings

BIN = Path(sys.executable).parent
RENEW_INTERVAL_MS, MAX_LIFETIME_MS = 60_000, 180_000
JOB_S, STEP_S = 360, 20
OUT = "/tmp/tokens/out"


class LongTokenJob:
    def __init__(self, state_dir: Path):
        self.state_dir = state_dir
        self.cluster = LocalCluster(state_dir)
        self.up_s = 0.0
        self.started = self.ended = 0.0
        self.proc: subprocess.CompletedProcess | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="long-token-job", daemon=True)
        self._down = False

    def start(self) -> LongTokenJob:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            settings = ClusterSettings.choose()
            settings.extra = {"dfs.namenode.delegation.token.renew-interval": str(RENEW_INTERVAL_MS),
                              "dfs.namenode.delegation.token.max-lifetime": str(MAX_LIFETIME_MS)}
            settings.save(self.state_dir / "cluster.json")
            began = time.monotonic()
            up = subprocess.run([str(BIN / "tony"), "cluster", "up", "--secure", "--state-dir", str(self.state_dir)],
                                capture_output=True, text=True, timeout=900)
            if up.returncode != 0:
                raise RuntimeError(f"tony cluster up --secure failed: {up.stderr.strip()[-2000:]}")
            self.up_s = time.monotonic() - began
            kdc = self.cluster.kdc
            # no ticket: the keytab is all the job has
            env = {**os.environ, **self.cluster.env(), "KRB5CCNAME": f"FILE:{self.state_dir / 'no-ticket'}"}
            env.pop("HADOOP_TOKEN_FILE_LOCATION", None)
            self.started = time.time()
            self.proc = subprocess.run(
                [str(BIN / "ytf-submit"), "--principal", kdc.user_principal, "--keytab", str(kdc.user_keytab),
                 "-r", "worker:1", "-m", "512", "-n", "longer-than-its-tokens", "-o", f"hdfs://{OUT}",
                 "--env", f"DURATION_S={JOB_S}", "--env", f"STEP_S={STEP_S}",
                 "-s", str(PAYLOADS / "writes_for.py"), "python3 ${DTF_TASK_SCRIPT}"],
                env=env, capture_output=True, text=True, timeout=JOB_S + 300)
            self.ended = time.time()
        except BaseException as exc:  # told by result(), in the test
            self._error = exc

    def result(self, timeout: float) -> LongTokenJob:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the long token job still runs after {timeout:.0f}s more")
        if self._error is not None:
            raise self._error
        return self

    def down(self) -> None:
        """Stop its cluster (once; also at the session's end when the test never ran)."""
        if self._down:
            return
        self._down = True
        self._thread.join(JOB_S + 900)
        if (self.state_dir / "cluster.json").exists():
            self.cluster.down(log=lambda *_: None)
