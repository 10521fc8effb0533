"""A real Airflow deployment for end-to-end tests: scheduler, dag-processor, triggerer and api-server as
separate processes (LocalExecutor, SQLite), driven only through the public REST API (`/api/v2`)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

COMPONENTS = ("scheduler", "dag-processor", "triggerer", "api-server")
BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AirflowDeployment:
    """One Airflow home, four daemons, and the calls a test makes through the REST API."""

    def __init__(self, home: Path, dag_files: list[Path], yarn_connection: str):
        self.home = home
        self.dags = home / "dags"
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen] = {}
        self.dag_files = dag_files
        self.openlineage_events = home / "openlineage.jsonl"  # where a file transport, when set, writes
        self.env = {
            **os.environ,
            "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor", "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__PARALLELISM": "4",
            # the REST API without a login (SimpleAuthManager's all-admins mode); one JWT secret for all
            # components, so the workers' tokens are valid at the api-server's execution API
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__API_AUTH__JWT_SECRET": "tony-airflow-e2e-" + os.urandom(8).hex(),
            "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base}/execution/",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            # what a user sets to defer every operator that can: the training waits in the triggerer
            "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True",
            "AIRFLOW_CONN_YARN_DEFAULT": yarn_connection,
        }
        self.http = httpx.Client(base_url=f"{self.base}/api/v2", timeout=30)

    # ------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 180) -> None:
        self.dags.mkdir(parents=True, exist_ok=True)
        for path in self.dag_files:
            shutil.copy(path, self.dags / path.name)
        subprocess.run([str(BIN / "airflow"), "db", "migrate"], env=self.env, check=True, capture_output=True,
                       timeout=300)
        for name in COMPONENTS:
            log = open(self.home / f"{name}.log", "w")
            self.procs[name] = subprocess.Popen([str(BIN / "airflow"), name], env=self.env, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        wanted = {p.stem for p in self.dag_files}
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                dags = {d["dag_id"] for d in self.get("/dags")["dags"]}
            except (httpx.HTTPError, KeyError, ValueError):
                dags = set()
            if wanted <= dags:
                return
            time.sleep(1)
        raise TimeoutError(f"the deployment did not list {wanted} within {timeout}s; logs in {self.home}")

    def check_alive(self) -> None:
        dead = {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}
        if dead:
            raise RuntimeError(f"Airflow component(s) exited: {dead}; logs in {self.home}")

    def stop(self) -> list[int]:
        """SIGTERM every component's process group, SIGKILL what is left after 30 s; the pids still alive."""
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self.http.close()
        return [p.pid for p in self.procs.values() if _group_alive(p.pid)]

    # ------------------------------------------------------------ REST API
    def get(self, path: str, **params: Any) -> Any:
        resp = self.http.get(path, params=params)
        resp.raise_for_status()
        return resp.json()

    def call(self, method: str, path: str, body: dict) -> Any:
        resp = self.http.request(method, path, json=body)
        resp.raise_for_status()
        return resp.json()

    def unpause(self, dag_id: str) -> None:
        self.call("PATCH", f"/dags/{dag_id}", {"is_paused": False})

    def trigger(self, dag_id: str) -> str:
        return self.call("POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None})["dag_run_id"]

    def ti_path(self, dag_id: str, run_id: str, task_id: str) -> str:
        return f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}"

    def task_state(self, dag_id: str, run_id: str, task_id: str) -> str | None:
        return self.get(self.ti_path(dag_id, run_id, task_id))["state"]

    def run_state(self, dag_id: str, run_id: str) -> str:
        return self.get(f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}")["state"]

    def wait_task(self, dag_id: str, run_id: str, task_id: str, until: set[str], timeout: float = 300,
                  seen: list[str] | None = None) -> str:
        """Poll the task's state until it is one of `until`; `seen` collects every state passed through."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            state = self.task_state(dag_id, run_id, task_id)
            if seen is not None and (not seen or seen[-1] != state):
                seen.append(state)
            if state in until:
                return state
            time.sleep(1)
        raise TimeoutError(f"{dag_id}.{task_id} not in {until} after {timeout}s (states {seen})")

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 300) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.run_state(dag_id, run_id)
            if state in ("success", "failed"):
                return state
            time.sleep(1)
        raise TimeoutError(f"{dag_id} {run_id} still running after {timeout}s")

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str) -> Any:
        return self.get(f"{self.ti_path(dag_id, run_id, task_id)}/xcomEntries/{key}")["value"]

    def links(self, dag_id: str, run_id: str, task_id: str, try_number: int | None = None) -> dict[str, str]:
        """The task's extra links, as the UI asks for them (for one try when `try_number` is given)."""
        params = {} if try_number is None else {"try_number": try_number}
        return self.get(f"{self.ti_path(dag_id, run_id, task_id)}/links", **params)["extra_links"]

    def openlineage_run_events(self) -> list[dict]:
        """The OpenLineage events the deployment emitted (the file transport's lines)."""
        if not self.openlineage_events.exists():
            return []
        lines = self.openlineage_events.read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip().startswith("{")]

    def log_events(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> list[dict]:
        """The task's log as Airflow serves it: one record per line (event, logger, level...)."""
        deadline = time.monotonic() + 60
        while True:  # an earlier try's log can answer 404 for a moment after the next try ended (seen once)
            resp = self.http.get(f"{self.ti_path(dag_id, run_id, task_id)}/logs/{try_number}",
                                 params={"full_content": "true"}, headers={"Accept": "application/json"})
            if resp.status_code != 404 or time.monotonic() > deadline:
                break
            time.sleep(1)
        resp.raise_for_status()
        return [e if isinstance(e, dict) else {"event": str(e)} for e in resp.json()["content"]]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
