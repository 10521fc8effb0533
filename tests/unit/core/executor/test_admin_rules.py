"""The node admin's rules for the containers the executor starts (#44 item 1): read where YARN's own Docker
runtime reads them (container-executor.cfg, section [docker]), refused in one line naming the rule.
Tried as a new user would before: `--docker-user root --mount /:/host:rw 'touch /host/tmp/x'` SUCCEEDED
and the file appeared on the node."""

from __future__ import annotations

import pytest

from tony_airflow.core.executor.admin_rules import AdminRules

CFG = """yarn.nodemanager.linux-container-executor.group=hadoop
banned.users=hdfs,yarn
[docker]
  module.enabled=true
  docker.allowed.ro-mounts=/etc/passwd,/data/shared
  docker.allowed.rw-mounts=/scratch/
  docker.privileged-containers.enabled=false
  tony.docker.allowed-users=etl,1500:1500
"""
ME = "1001:1001"


@pytest.fixture
def rules(tmp_path) -> AdminRules:
    (tmp_path / "container-executor.cfg").write_text(CFG)
    return AdminRules.load(str(tmp_path))


@pytest.mark.parametrize("mount, allowed", [
    ("/data/shared:/data:ro", True),
    ("/data/shared/part-0:/in:ro", True),         # below an allowed directory
    ("/data/sharedx:/in:ro", False),               # a prefix of the name is not a directory above it
    ("/data/shared:/data:rw", False),              # ro only
    ("/scratch/run1:/out:rw", True),
    ("/scratch:/s:ro", True),                      # rw allowed implies ro
    ("/:/host:rw", False),
    ("/etc/../:/host:ro", False),                  # normalized before it is compared
    ("/data/shared/../../etc/shadow:/s:ro", False),
])
def test_mounts_are_allowed_as_youre_admin_listed_them(rules, mount, allowed):
    line = rules.refusal([mount], "", ME)
    assert (line is None) is allowed, line
    if not allowed:
        mode = mount.rsplit(":", 1)[1]
        assert line.startswith(f"mount {mount}: refused by this node's docker.allowed.{mode}-mounts (")
        assert "container-executor.cfg" in line and "\n" not in line


def test_without_a_file_only_the_containers_own_directories_are_mounted(tmp_path):
    rules = AdminRules.load(str(tmp_path))
    assert rules.refusal([], "", ME) is None
    line = rules.refusal(["/:/host:rw"], "", ME)
    assert line == (f"mount /:/host:rw: refused by this node's docker.allowed.rw-mounts (none: no "
                    f"{tmp_path}/container-executor.cfg); an admin allows a source there")


@pytest.mark.parametrize("user, allowed", [("", True), (ME, True), ("1001", True), ("etl", True),
                                           ("1500:1500", True), ("root", False), ("0:0", False)])
def test_a_container_runs_as_the_yarn_containers_own_user_unless_the_admin_allows_another(rules, user, allowed):
    line = rules.refusal([], user, ME)
    assert (line is None) is allowed, line
    if not allowed:
        assert line.startswith(f"docker_user {user}: refused by this node's tony.docker.allowed-users (etl, "
                               f"1500:1500")


def test_the_jobs_own_local_input_and_output_are_the_jobs_and_its_mounts_are_the_admins(tmp_path, monkeypatch):
    """Found by the fresh-clone run: `--docker_image … -o /tmp/…/seen` was refused. The job's own --input
    (ro) and --output (rw) are mounted as the YARN container's own user, with the rights a task without
    an image has on the node; the rules govern what `--mount` adds and who the container runs as."""
    from tests.unit.core.support import make_job
    from tony_airflow.core.executor.task import Executor
    from tony_airflow.core.runtimes import TaskIdentity

    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))  # no container-executor.cfg: the defaults
    job = make_job("worker:1", input=str(tmp_path / "in"), output=str(tmp_path / "out"))
    me = TaskIdentity(type="worker", index=0, attempt=1, app_id="app_1")
    assert Executor(job, me, None, "h")._refused_by_admin() is None
    job = make_job("worker:1", output=str(tmp_path / "out"), docker_mounts=["/:/host:rw"])
    assert Executor(job, me, None, "h")._refused_by_admin().startswith("mount /:/host:rw: refused")
