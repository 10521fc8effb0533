"""The skein application the client builds: files, services, and the Docker launch context.

There is no Docker engine on this machine, so the Docker runtime is checked
here, on the launch context YARN would receive, not by running a container.
"""

from __future__ import annotations

from pathlib import Path

from tony_airflow.core import protocol
from tony_airflow.core.client import VENV_DIR, build_application
from tony_airflow.core.placement import initial_container_ids
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


def test_docker_launch_context(tmp_path, monkeypatch):
    job, app = _app(tmp_path, monkeypatch, docker_image="tf/tensorflow:2.21.0", input="/data/in",
                    output="hdfs:///models/run1")
    env = app.services["worker"].env
    assert env["YARN_CONTAINER_RUNTIME_TYPE"] == "docker"
    assert env["YARN_CONTAINER_RUNTIME_DOCKER_IMAGE"] == "tf/tensorflow:2.21.0"
    mounts = env["YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS"].split(",")
    assert mounts == ["/etc/hadoop/conf:/etc/hadoop/conf:ro", "/usr/lib/jvm/java-17:/usr/lib/jvm/java-17:ro",
                      "/data/in:/data/in:ro"]  # HDFS output is not a mount
    assert "YARN_CONTAINER_RUNTIME_TYPE" not in app.master.env  # the AM runs natively


def test_packed_environment_is_an_archive_of_the_tasks_only(tmp_path, monkeypatch):
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"")
    job, app = _app(tmp_path, monkeypatch, python_venv=str(archive))
    assert app.services["worker"].files[VENV_DIR].type == "ARCHIVE"
    assert VENV_DIR not in app.master.files


def test_executor_identity_from_environment_or_skein_container_id(monkeypatch):
    from tony_airflow.core.executor import task

    job = build_job_spec({"cluster_requirement": "ps:1,worker:3", "command": "x", "task_memory": "worker[2]:4096",
                          "client": True})
    retry = {"TONY_TASK_TYPE": "worker", "TONY_TASK_INDEX": "2", "TONY_ATTEMPT": "3", "TONY_AM_ADDRESS": "h:1",
             "TONY_APPLICATION_ID": "application_1_1"}
    assert task.first_attempt_env(job, retry) is None
    me, address = task.identity(retry)
    assert (me.type, me.index, me.attempt, address) == ("worker", 2, 3, "h:1")

    class FakeKV:
        def wait(self, key):
            assert key == "tony.am_address"
            return b"am:4242"

    class FakeApp:
        kv = FakeKV()

    import skein

    monkeypatch.setattr(skein.ApplicationClient, "from_current", staticmethod(lambda: FakeApp()))
    first = {"SKEIN_CONTAINER_ID": "worker_1", "SKEIN_APPLICATION_ID": "application_1_1"}
    told = task.first_attempt_env(job, first)
    me, address = task.identity(told)
    assert (me.type, me.index, me.attempt, me.app_id, address) == ("worker", 1, 1, "application_1_1", "am:4242")
    assert task.first_attempt_env(job, {**first, "SKEIN_CONTAINER_ID": "worker-2_0"})["TONY_TASK_INDEX"] == "2"
    assert "chief_0" not in initial_container_ids(job)  # --client: the chief runs in the submitting process
