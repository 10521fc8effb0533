"""The skein application the client builds: files, services, and the Docker launch context.

YARN's Docker runtime (`docker_runtime: yarn`) needs LinuxContainerExecutor, which the local
cluster does not run; it is checked here, on the launch context YARN would receive. The default
runtime (`engine`) runs for real in tests/e2e/test_docker_engine.py.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from tony_airflow.core import protocol
from tony_airflow.core.client import build_application
from tony_airflow.core.placement import initial_container_ids
from tony_airflow.core.protocol import VENV_DIR
from tony_airflow.core.spec import build_job_spec


def _app(tmp_path: Path, monkeypatch, **opts):
    monkeypatch.setenv("HADOOP_CONF_DIR", "/etc/hadoop/conf")
    monkeypatch.setenv("JAVA_HOME", "/usr/lib/jvm/java-17")
    job = build_job_spec({"cluster_requirement": "ps:1,worker:2", "command": "python3 train.py",
                          "task_memory": ["1024", "worker[1]:3072"], **opts})
    staging = tmp_path / "staging"
    staging.mkdir()
    return job, build_application(job, staging, "s" * 64)


def test_services_per_resource_profile_and_shipped_files(tmp_path, monkeypatch):
    job, app = _app(tmp_path, monkeypatch)
    assert set(app.services) == {"ps", "worker", "worker-1"}
    assert app.services["worker-1"].resources.memory == 3072
    assert app.services["worker"].resources.memory == 1024
    # attempt 1's containers are asked for by skein's AM at start; worker:1 has its own profile
    assert {n: s.instances for n, s in app.services.items()} == {"ps": 1, "worker": 1, "worker-1": 1}
    assert initial_container_ids(job) == {"ps_0": ("ps", 0), "worker_0": ("worker", 0), "worker-1_0": ("worker", 1)}
    for service in app.services.values():
        assert service.allow_failures and service.max_restarts == 0
        assert {protocol.JOB_FILE, protocol.SECRET_FILE} <= set(service.files)
    assert "tony_airflow.core.am" in app.master.script
    # the secret travels as a file, never on a command line or in the environment
    assert "s" * 64 not in app.master.script + str(app.master.env) + str(app.services["ps"].env)
    assert (tmp_path / "staging" / protocol.SECRET_FILE).stat().st_mode & 0o077 == 0
    assert "tony-airflow" in app.tags


def test_skeins_java_am_starts_light_unless_the_job_says_otherwise(tmp_path, monkeypatch):
    _, app = _app(tmp_path, monkeypatch)
    assert app.master.env["JAVA_TOOL_OPTIONS"] == "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    assert "JAVA_TOOL_OPTIONS" not in app.services["worker"].env  # the tasks' JVMs are the user's
    (tmp_path / "b").mkdir()
    _, app = _app(tmp_path / "b", monkeypatch, env=["JAVA_TOOL_OPTIONS=-Xss2m"])
    assert app.master.env["JAVA_TOOL_OPTIONS"] == "-Xss2m"


def test_docker_launch_context(tmp_path, monkeypatch):
    job, app = _app(tmp_path, monkeypatch, docker_image=["tf/tensorflow:2.21.0", "ps:tf/ps:1"], input="/data/in",
                    output="hdfs:///models/run1", docker_runtime="yarn", docker_mounts="/scratch:/scratch:ro")
    assert app.services["ps"].env["YARN_CONTAINER_RUNTIME_DOCKER_IMAGE"] == "tf/ps:1"  # the type's own image
    env = app.services["worker"].env
    assert env["YARN_CONTAINER_RUNTIME_TYPE"] == "docker"
    assert env["YARN_CONTAINER_RUNTIME_DOCKER_IMAGE"] == "tf/tensorflow:2.21.0"
    mounts = env["YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS"].split(",")
    assert mounts == ["/etc/hadoop/conf:/etc/hadoop/conf:ro", "/usr/lib/jvm/java-17:/usr/lib/jvm/java-17:ro",
                      "/data/in:/data/in:ro", "/scratch:/scratch:ro"]  # HDFS output is not a mount
    assert "YARN_CONTAINER_RUNTIME_TYPE" not in app.master.env  # the AM runs natively


def test_the_engine_runtime_asks_nothing_of_yarn(tmp_path, monkeypatch):
    _, app = _app(tmp_path, monkeypatch, docker_image="tf/tensorflow:2.21.0")
    assert not any(k.startswith("YARN_CONTAINER_RUNTIME") for s in app.services.values() for k in s.env)


def test_packed_environment_is_an_archive_of_the_tasks_only(tmp_path, monkeypatch):
    archive = tmp_path / "env.tar.gz"
    with tarfile.open(archive, "w:gz"):  # an empty but real archive
        pass
    job, app = _app(tmp_path, monkeypatch, python_venv=str(archive))
    assert app.services["worker"].files[VENV_DIR].type == "ARCHIVE"
    assert VENV_DIR not in app.master.files


class FakeKV:
    """skein's key-value store, as attempt 1's executors read it."""

    def __init__(self, initial_attempt: bytes | None = None):
        self.initial_attempt = initial_attempt

    def wait(self, key):
        assert key == "tony.am_address"
        return b"am:4242"

    def get(self, key, default=None):
        assert key == "tony.initial_attempt"
        return self.initial_attempt


def test_executor_identity_from_environment_or_skein_container_id():
    from tony_airflow.core.executor import task
    from tony_airflow.core.executor.boot import first_attempt_env

    job = build_job_spec({"cluster_requirement": "ps:1,worker:3", "command": "x", "task_memory": "worker[2]:4096",
                          "client": True})
    retry = {"TONY_TASK_TYPE": "worker", "TONY_TASK_INDEX": "2", "TONY_ATTEMPT": "3", "TONY_AM_ADDRESS": "h:1",
             "TONY_APPLICATION_ID": "application_1_1"}
    assert first_attempt_env(job, retry) is None
    me, address = task.identity(retry)
    assert (me.type, me.index, me.attempt, address) == ("worker", 2, 3, "h:1")

    first = {"SKEIN_CONTAINER_ID": "worker_1", "SKEIN_APPLICATION_ID": "application_1_1"}
    told = first_attempt_env(job, first, kv=FakeKV())
    me, address = task.identity(told)
    assert (me.type, me.index, me.attempt, me.app_id, address) == ("worker", 1, 1, "application_1_1", "am:4242")
    assert first_attempt_env(job, {**first, "SKEIN_CONTAINER_ID": "worker-2_0"}, kv=FakeKV())["TONY_TASK_INDEX"] == "2"
    assert "chief_0" not in initial_container_ids(job)  # --client: the chief runs in the submitting process
    # a new YARN application attempt (the AM was lost): skein starts the same containers, for the next attempt
    again = first_attempt_env(job, first, kv=FakeKV(initial_attempt=b"3"))
    assert task.identity(again)[0].attempt == 3


def test_first_attempt_lookup_runs_in_a_forked_child(tmp_path, monkeypatch):
    """The answer, or the child's error in one line, comes back through the pipe."""
    import skein

    from tony_airflow.core.executor.boot import start_lookup

    job = build_job_spec({"cluster_requirement": "ps:1,worker:2", "command": "x"})
    (tmp_path / "job.json").write_text(job.to_json())
    app = type("App", (), {"kv": FakeKV()})
    monkeypatch.setattr(skein.ApplicationClient, "from_current", staticmethod(lambda: app))
    env = {"SKEIN_CONTAINER_ID": "ps_0", "SKEIN_APPLICATION_ID": "application_1_7"}
    assert start_lookup({"TONY_TASK_TYPE": "ps"}, str(tmp_path / "job.json")) is None
    told = start_lookup(env, str(tmp_path / "job.json")).result()
    assert told == {"TONY_TASK_TYPE": "ps", "TONY_TASK_INDEX": "0", "TONY_ATTEMPT": "1",
                    "TONY_AM_ADDRESS": "am:4242", "TONY_APPLICATION_ID": "application_1_7"}
    with pytest.raises(RuntimeError, match="could not learn this container's task: KeyError: 'evaluator_0'"):
        start_lookup({**env, "SKEIN_CONTAINER_ID": "evaluator_0"}, str(tmp_path / "job.json")).result()


def test_skeins_spec_keeps_one_attempt_whatever_the_jobs_am_attempts(tmp_path):
    """Seen on the 3-host cluster: with two attempts in its spec, skein's AM answered a FAILED job with
    'Application attempt 1 out of 2 failed, will retry', and a second AM ran the failed job again."""
    from tony_airflow.core.client import build_application

    job = build_job_spec({"cluster_requirement": "worker:1", "command": "x", "am_attempts": 2})
    assert build_application(job, tmp_path, "s3cret", "/conf").max_attempts == 1


def test_a_keytab_goes_to_the_am_alone_as_a_private_file(tmp_path, monkeypatch):
    """Issue #44 item 2: the AM gets new HDFS tokens from it during the job; no task ever sees it."""
    from tony_airflow.core.am.token_renewal import KEYTAB_ENV, KEYTAB_FILE, PRINCIPAL_ENV
    from tony_airflow.yarn.kerberos import KerberosLogin

    keytab = tmp_path / "ada.keytab"
    keytab.write_bytes(b"\x05\x02")
    monkeypatch.setenv("KRB5_CONFIG", "/etc/realm/krb5.conf")
    job = build_job_spec({"cluster_requirement": "worker:2", "command": "x"})
    spec = build_application(job, tmp_path, "s3cret", "/conf", KerberosLogin("ada@TONY.TEST", str(keytab)))
    shipped = spec.master.files[KEYTAB_FILE]
    assert (shipped.source, str(shipped.visibility).lower()) == (f"file://{keytab}", "private")
    assert spec.master.env[KEYTAB_ENV] == KEYTAB_FILE and spec.master.env[PRINCIPAL_ENV] == "ada@TONY.TEST"
    assert spec.master.env["KRB5_CONFIG"] == "/etc/realm/krb5.conf"
    for service in spec.services.values():
        assert KEYTAB_FILE not in service.files and KEYTAB_ENV not in service.env
    plain = build_application(job, tmp_path, "s3cret", "/conf")
    assert KEYTAB_FILE not in plain.master.files and KEYTAB_ENV not in plain.master.env
