"""Issue #31: the Docker options (spec, command line, Azkaban's TonY keys) and the engine's command line.

The engines themselves run in tests/e2e/test_docker_engine.py; here, what the executor tells them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tony_airflow.cli import submit
from tony_airflow.core.executor import engine
from tony_airflow.core.spec import TENSORBOARD_COMMAND, build_job_spec
from tony_airflow.engines.azkaban import job_options

from .test_spec_hardening import _refuse


def _job(**opts):
    return build_job_spec({"cluster_requirement": "ps:1,worker:2", "command": "python3 t.py", **opts})


# ------------------------------------------------------------------ the options
def test_a_type_named_before_the_image_gives_that_type_its_own_image():
    job = _job(docker_image=["tf/base:1", "worker:registry:5000/tf/gpu:2.21"], tensorboard=True, output="/o")
    assert job.image_of("worker") == "registry:5000/tf/gpu:2.21"
    assert job.image_of("ps") == "tf/base:1"
    assert job.image_of("tensorboard") == ""  # the project's own TensorBoard runs on the node
    assert job.tasks["tensorboard"].command == TENSORBOARD_COMMAND
    assert (job.docker_runtime, job.docker_engine, job.docker_user) == ("engine", "docker", "")


def test_the_option_beats_the_types_own_entry_which_beats_the_jobs_image():
    job = build_job_spec({"tasks": {"ps": {"instances": 1, "docker_image": "tf/ps:1"}, "worker": 2},
                          "command": "x", "docker_image": "tf/all:1"})
    assert (job.image_of("ps"), job.image_of("worker")) == ("tf/ps:1", "tf/all:1")
    job = build_job_spec({"tasks": {"ps": {"instances": 1, "docker_image": "tf/ps:1"}, "worker": 1},
                          "command": "x", "docker_image": "ps:tf/opt:2"})
    assert job.image_of("ps") == "tf/opt:2"


def test_the_spec_travels_whole_to_the_executor():
    job = _job(docker_image="ps:tf/ps:1", docker_engine="podman", docker_mounts=["/a:/b", "/c:/d:ro"],
               docker_user="1000:1000")
    again = type(job).from_json(job.to_json())
    assert again == job and again.docker_mounts == ["/a:/b:rw", "/c:/d:ro"]


@pytest.mark.parametrize("argv, start", [
    (["--docker_image", "tf:1", "--docker_engine", "containerd"], "error: docker_engine: 'containerd' is not known"),
    (["--docker_image", "tf:1", "--docker_runtime", "kata"], "error: docker_runtime: 'kata' is not known"),
    (["--docker_image", "tf:1", "--mount", "relative:/x"], "error: docker_mounts: 'relative:/x' is malformed"),
    (["--docker_image", "tf:1", "--mount", "/a:/b:rx"], "error: docker_mounts: '/a:/b:rx' is malformed"),
    (["--docker_image", "tf:1", "--docker-user", "root;rm"], "error: docker_user: 'root;rm' is not UID:GID"),
    # #51 item 7: the engine resolves a name in the image (where it may be uid 0) and gives a bare uid gid 0
    (["--docker_image", "tf:1", "--docker-user", "ada"], "error: docker_user: 'ada' is not UID:GID"),
    (["--docker_image", "tf:1", "--docker-user", "1000"], "error: docker_user: '1000' is not UID:GID"),
    (["--docker_image", "tf:1", "--docker-user", "ada:ada"], "error: docker_user: 'ada:ada' is not UID:GID"),
    (["--docker_image", "worker:Bad Image"], "error: docker_image (worker): 'Bad Image' is not an image reference"),
    (["--docker_image", "worker:"], "error: docker_image (worker): is empty"),
    (["--docker_image", "tf:1", "--client"], "error: docker_image: --client runs the chief in the submitting"),
])
def test_bad_docker_options_are_refused_in_one_line(argv, start, capsys, monkeypatch):
    line = _refuse(["-r", "worker:1", *argv, "python3 x.py"], capsys, monkeypatch)
    assert line.startswith(start) and "allowed:" in line, line


def test_azkaban_takes_tonys_docker_keys():
    props = {"tony.worker.instances": "2", "tony.ps.instances": "1", "task_command": "python3 t.py",
             "tony.docker.enabled": "true", "tony.docker.containers.image": "tf/base:1",
             "tony.docker.ps.image": "tf/ps:1", "tony.docker.containers.mount": "/data:/data:ro,/scratch:/s"}
    job = build_job_spec(job_options(props))
    assert (job.image_of("worker"), job.image_of("ps")) == ("tf/base:1", "tf/ps:1")
    assert job.docker_mounts == ["/data:/data:ro", "/scratch:/s:rw"]
    off = build_job_spec(job_options({**props, "tony.docker.enabled": "false"}))
    assert off.image_of("worker") == "" and off.docker_mounts == []  # TonY ignores the images without it


@pytest.mark.parametrize("props, start", [
    ({"tony.docker.enabled": "yes"}, "tony.docker.enabled: 'yes'; allowed: true, false"),
    ({"tony.docker.enabled": "true"}, "tony.docker.enabled: true, but no image"),
    ({"tony.docker.containers.imag": "x"}, "tony.docker.containers.imag: unknown key"),
])
def test_azkaban_refuses_bad_docker_keys(props, start):
    with pytest.raises(Exception) as exc:
        build_job_spec(job_options({"cluster_requirement": "worker:1", "task_command": "x", **props}))
    assert str(exc.value).startswith(start), exc.value


# -------------------------------------------------------- the engine's command line
def _plan(**over) -> engine.ContainerPlan:
    fields = dict(engine="docker", image="tony-airflow/tensorflow:0.1", name="tony-container_1_0001_01_000002",
                  workdir="/nm/app/c2", command="python3 t.py", env_names=["DTF_TASK_INDEX", "TF_CONFIG"],
                  mounts=["/nm/app/c2:/nm/app/c2:rw", "/etc/hadoop:/etc/hadoop:ro"], memory_mb=2048, vcores=2,
                  user="1000:1000", labels={engine.LABEL: "1", f"{engine.LABEL}.task": "worker:0"},
                  home="/nm/app/c2", ulimits={"nofile": 1024})
    fields.update(over)
    return engine.ContainerPlan(**fields)  # type: ignore[arg-type]


def _after(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_the_container_gets_the_nodes_network_the_yarn_containers_limits_and_user():
    argv = _plan().argv()
    assert argv[:5] == ["docker", "run", "--rm", "-i", "--name"]
    assert _after(argv, "--network") == ["host"]
    assert _after(argv, "--memory") == ["2048m"] and _after(argv, "--memory-swap") == ["2048m"]
    assert _after(argv, "--cpus") == ["2"] and _after(argv, "--user") == ["1000:1000"]
    assert _after(argv, "--workdir") == ["/nm/app/c2"] and _after(argv, "--entrypoint") == ["/bin/sh"]
    assert _after(argv, "--volume") == ["/nm/app/c2:/nm/app/c2:rw", "/etc/hadoop:/etc/hadoop:ro"]
    assert _after(argv, "--label") == [f"{engine.LABEL}=1", f"{engine.LABEL}.task=worker:0"]
    assert _after(argv, "--ulimit") == ["nofile=1024:1024"]
    # the values stay in the client's environment: a secret never shows in `ps`
    assert _after(argv, "--env") == ["HOME=/nm/app/c2", "DTF_TASK_INDEX", "TF_CONFIG"]
    assert argv[-5:] == ["tony-airflow/tensorflow:0.1", "-c", engine.WATCHDOG, "tony-task", "python3 t.py"]
    assert "--runtime" not in argv and "--gpus" not in argv


def test_gpus_are_handed_to_each_engine_in_its_own_words():
    assert _after(_plan(gpus=[0, 2]).argv(), "--gpus") == ['"device=0,2"']
    podman = _plan(engine="podman", gpus=[1], runtime="runc").argv()
    assert _after(podman, "--device") == ["nvidia.com/gpu=1"] and _after(podman, "--runtime") == ["runc"]
    assert "--log-driver" not in podman


def test_the_container_sees_the_task_environment_not_the_nodes_paths():
    node = {"PATH": "/usr/bin", "HOME": "/root", "HADOOP_CONF_DIR": "/etc/hadoop", "CONTAINER_ID": "c",
            "TONY_TASK_TYPE": "worker", "SHELL": "/bin/bash", "MY_FLAG": "1"}
    env = {**node, "PATH": "/venv/bin:/usr/bin", "TF_CONFIG": "{}", "DTF_TASK_INDEX": "0",
           "CUDA_VISIBLE_DEVICES": "0"}
    names = engine.env_names(env, node, {"MY_FLAG": "1"})
    assert names == ["CONTAINER_ID", "CUDA_VISIBLE_DEVICES", "DTF_TASK_INDEX", "HADOOP_CONF_DIR", "MY_FLAG",
                     "TF_CONFIG", "TONY_TASK_TYPE"]


def test_mounts_follow_what_yarn_localized_and_the_hadoop_directories(tmp_path: Path):
    cache, work, conf, out = (tmp_path / n for n in ("filecache", "work", "conf", "out"))
    for d in (cache, work, conf, out):
        d.mkdir()
    (cache / "t.py").write_text("")
    (work / "t.py").symlink_to(cache / "t.py")
    (work / "output").mkdir()
    got = engine.mounts(work, {"HADOOP_CONF_DIR": str(conf), "JAVA_HOME": "/nonexistent"},
                        [(str(out), "rw"), ("/nonexistent/in", "ro")], ["/x:/y:ro", f"/z:{work}:ro"])
    assert got == [f"{work}:{work}:rw", f"{cache / 't.py'}:{cache / 't.py'}:ro", f"{conf}:{conf}:ro",
                   f"{out}:{out}:rw", "/x:/y:ro"]  # a job mount over ours is dropped, not doubled


def test_an_elastic_jobs_rendezvous_package_is_mounted_into_the_image(tmp_path: Path):
    """Issue 51: torchrun in an image loads the AM's rendezvous from the package the plugin directory links."""
    from tony_airflow.core.executor.torchrun_plugin import plugin_dir

    work = tmp_path / "work"
    work.mkdir()
    package = (plugin_dir(work) / "tony_airflow").resolve()
    assert f"{package}:{package}:ro" in engine.mounts(work, {}, [], [])


@pytest.mark.parametrize("code, tail, start", [
    (137, "Killed\ntony-engine: oom_kill", "worker:0: the command went over its container's memory limit (2048 MiB)"),
    (127, 'docker: Error response from daemon: failed to create shim task: OCI runtime create failed: runc create '
          'failed: unable to start container process: exec: "/bin/sh": stat /bin/sh: no such file or directory: '
          'unknown', "worker:0: image 'tony-airflow/tensorflow:0.1' has no /bin/sh on h1 (docker)"),
    (125, "docker: Error response from daemon: invalid mount config", "worker:0: docker could not start the "
                                                                      "container on h1: invalid mount config"),
    (127, "bash: line 1: python4: command not found", ""),  # the command's own exit code
    (1, "Error: the user's own message", ""),
])
def test_what_the_engine_ended_is_said_in_one_line(code, tail, start):
    line = engine.explain_exit(code, tail, _plan(), "h1", "worker:0")
    assert line.startswith(start) and "\n" not in line, line
    assert bool(line) == bool(start)
    if code == 137:  # issue #53 item 7: what to do about it
        assert line.endswith("allowed: more memory, -m worker:<MiB> (task_memory)"), line


@pytest.mark.parametrize("code, tail, killed", [
    (137, "Killed\ntony-engine: oom_kill", True),  # the container's cgroup counted an oom_kill
    (137, "Killed", False),                         # SIGKILL from elsewhere: the count stayed 0
    (0, "tony-engine: oom_kill", True),             # a child killed, the command went on and succeeded
])
def test_a_memory_kill_is_what_the_containers_cgroup_counted(code, tail, killed):
    """#51 item 12: the AM tells a memory kill from a lost worker by this, reported with the exit code."""
    assert engine.memory_killed(tail) is killed


def test_a_missing_engine_is_one_line(monkeypatch):
    monkeypatch.setattr(engine.shutil, "which", lambda name: None)
    with pytest.raises(engine.EngineError, match=r"^worker:0: podman is not installed on h1 \(docker_engine: "):
        engine.preflight("podman", "tf:1", "h1", "worker:0")


@pytest.mark.parametrize("stderr, start", [
    ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
     "worker:0: the docker daemon is not running on h1: Cannot connect"),
    ("Got permission denied while trying to connect to the Docker daemon socket", "worker:0: permission denied on h1"),
])
def test_a_daemon_that_does_not_answer_is_one_line(stderr, start, monkeypatch):
    monkeypatch.setattr(engine.shutil, "which", lambda name: "/usr/bin/docker")
    monkeypatch.setattr(engine, "other_network_namespace", lambda: False)
    monkeypatch.setattr(engine, "_run", lambda argv, timeout: engine.subprocess.CompletedProcess(argv, 1, "", stderr))
    with pytest.raises(engine.EngineError) as exc:
        engine.preflight("docker", "tf:1", "h1", "worker:0")
    assert str(exc.value).startswith(start), exc.value


def test_docker_is_refused_on_a_host_in_its_own_network_namespace(monkeypatch):
    monkeypatch.setattr(engine.shutil, "which", lambda name: "/usr/bin/docker")
    monkeypatch.setattr(engine, "other_network_namespace", lambda: True)
    with pytest.raises(engine.EngineError, match="use docker_engine: podman"):
        engine.preflight("docker", "tf:1", "h1", "worker:0")


def test_the_submit_options_reach_the_spec():
    parse = submit.build_parser().parse_args
    job = submit.job_from_args(parse(["-r", "worker:2", "--docker_image", "tf:1", "--docker_engine", "podman",
                                      "--mount", "/data:/data:ro", "--docker-user", "1000:1000", "x"]))
    assert (job.docker_engine, job.docker_mounts, job.docker_user) == ("podman", ["/data:/data:ro"], "1000:1000")


def test_the_nproc_limit_given_to_the_engine_is_at_most_pid_max(monkeypatch):
    monkeypatch.setattr(engine.resource, "getrlimit", lambda which: (96365, 96365))
    limits = engine.node_ulimits()
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert limits == {"nofile": 96365, "nproc": min(96365, pid_max)}


def test_the_daemons_network_namespace_is_read_from_its_pid_file(tmp_path):
    pidfile = tmp_path / "docker.pid"
    pidfile.write_text(str(os.getpid()))
    assert engine.other_network_namespace(str(pidfile)) is False  # this process: the same namespace
    assert engine.other_network_namespace(str(tmp_path / "absent")) is False  # PID 1's, the same here
