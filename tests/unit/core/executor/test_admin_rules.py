"""The node admin's rules for the containers the executor starts (#44 item 1): read where YARN's own Docker
runtime reads them (container-executor.cfg, section [docker]), refused in one line naming the rule.
Tried as a new user would before: `--docker-user root --mount /:/host:rw 'touch /host/tmp/x'` SUCCEEDED
and the file appeared on the node."""

from __future__ import annotations

import os
import pwd

import pytest

from tony_airflow.core.executor import admin_rules
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
        source = os.path.realpath(mount.split(":")[0])
        named = f"mount {mount}" + ("" if source == mount.split(":")[0] else f" (source {source})")
        assert line.startswith(f"{named}: refused by this node's docker.allowed.{mode}-mounts (")
        assert "container-executor.cfg" in line and "\n" not in line


def test_without_a_file_only_the_containers_own_directories_are_mounted(tmp_path):
    rules = AdminRules.load(str(tmp_path))
    assert rules.refusal([], "", ME) is None
    line = rules.refusal(["/:/host:rw"], "", ME)
    assert line == (f"mount /:/host:rw: refused by this node's docker.allowed.rw-mounts (none: no "
                    f"{tmp_path}/container-executor.cfg); an admin allows a source there")


@pytest.mark.parametrize("user, allowed", [("", True), (ME, True), ("1500:1500", True), ("0:0", False),
                                           ("1001:0", False),  # its own uid in root's group
                                           ("1500:0", False)])
def test_a_container_runs_as_the_yarn_containers_own_user_unless_the_admin_allows_another(rules, user, allowed):
    line = rules.refusal([], user, ME)
    assert (line is None) is allowed, line
    if not allowed:
        assert line.startswith(f"docker_user {user}: refused by this node's tony.docker.allowed-users (etl, "
                               f"1500:1500")


@pytest.mark.parametrize("user", ["1001", "root", "etl", "ada:1001"])
def test_only_a_numeric_uid_gid_is_checked_because_the_engine_resolves_names_in_the_image(rules, user,
                                                                                          monkeypatch):
    """#51 item 7: `--docker-user NAME` (or a bare uid) passed as the user's own through the node's passwd,
    but the engine resolves a name inside the image (where it can be uid 0) and gives a bare uid gid 0.
    Submission refuses them (exit 2); a job file that carries one anyway is refused here, never run."""
    monkeypatch.setattr(admin_rules.pwd, "getpwnam", lambda name: _passwd(name, 1001, 1001))
    line = rules.refusal([], user, ME)
    assert line is not None and line.startswith(f"docker_user {user}: not UID:GID;"), line


def test_a_name_in_the_admins_list_is_the_nodes_user_with_its_own_group(rules, monkeypatch):
    """The list is the node's file: its names are the node's users, compared as their uid:gid."""
    monkeypatch.setattr(admin_rules.pwd, "getpwnam",
                        lambda name: _passwd(name, 1700, 1800) if name == "etl" else (_ for _ in ()).throw(KeyError))
    assert rules.refusal([], "1700:1800", ME) is None
    assert rules.refusal([], "1700:0", ME) is not None


def _passwd(name: str, uid: int, gid: int):
    return pwd.struct_passwd((name, "x", uid, gid, "", "/", "/bin/sh"))


def test_the_engine_mounts_the_path_that_was_checked_not_the_symlink(tmp_path, monkeypatch):
    """#51 item 7: a mount was checked on its resolved path while `docker run` got the symlink, which its
    owner can point elsewhere between the check and the run. The engine gets the resolved source."""
    from tests.unit.core.support import make_job
    from tony_airflow.core.executor.task import Executor
    from tony_airflow.core.runtimes import TaskIdentity

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "container-executor.cfg").write_text(f"[docker]\n  docker.allowed.ro-mounts={scratch}\n")
    link = tmp_path / "link"
    link.symlink_to(scratch)
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path / "conf"))
    monkeypatch.chdir(tmp_path)
    job = make_job("worker:1", docker_image="tf:1", docker_mounts=[f"{link}:/in:ro"])
    executor = Executor(job, TaskIdentity(type="worker", index=0, attempt=1, app_id="app_1"), None, "h")
    assert executor._refused_by_admin() is None
    plan = executor._container_plan("true", {}, None, [])
    assert plan is not None
    assert f"{scratch}:/in:ro" in plan.mounts and not any(m.startswith(f"{link}:") for m in plan.mounts)


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
