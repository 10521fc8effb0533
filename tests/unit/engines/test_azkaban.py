"""The Azkaban entry point's mapping of job properties onto the job spec, and its bad-input refusals."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tony_airflow.core.spec import build_job_spec
from tony_airflow.engines.azkaban import job_options, read_job_props
from tony_airflow.errors import UsageError


def _props(tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "job.props"
    path.write_bytes(text.encode("latin-1"))
    return read_job_props(str(path))


def test_java_properties_syntax_with_escapes_and_continuations(tmp_path):
    props = _props(tmp_path, "a\\:b = x\\=y\nlong = one \\\n    two\nname : caf\\u00e9\n! comment\n# comment\nsp\\ ace=1\n")
    assert props == {"a:b": "x=y", "long": "one two", "name": "café", "sp ace": "1"}


def test_tony_keys_map_onto_the_job_spec(tmp_path):
    props = _props(tmp_path, "\n".join([
        "type=tensorflow", "command=tony-azkaban", "azkaban.flow.execid=42", "azkaban.flow.flowid=nightly",
        "azkaban.flow.projectname=ml", "azkaban.job.id=train", "some.flow.param=left alone",
        "executes=train.py", "task_params=--epochs 3 --lr 0.1", "src_dir=" + str(tmp_path),
        "tony.worker.instances=2", "tony.worker.memory=4g", "tony.worker.vcores=2", "tony.ps.instances=1",
        "tony.worker.gpus=0", "tony.application.name=nightly-train", "tony.application.tags=team-a,daily",
        "tony.application.timeout=600000", "tony.yarn.queue=ml", "worker_env.LOG_LEVEL=debug",
        "output=hdfs:///models/x", "tony.application.tensorboard-log-dir=hdfs:///models/x/tb",
        "tony.history.location=/shared/tony-history",
    ]))
    job = build_job_spec(job_options(props))
    assert (job.tasks["worker"].instances, job.tasks["worker"].memory_mb, job.tasks["worker"].vcores) == (2, 4096, 2)
    assert job.tasks["ps"].instances == 1 and "tensorboard" in job.tasks
    assert job.command == "python3 train.py --epochs 3 --lr 0.1" and job.src_dir == str(tmp_path)
    assert (job.name, job.queue, job.timeouts.application) == ("nightly-train", "ml", 600.0)
    assert job.env == {"LOG_LEVEL": "debug"} and job.history_dir == "/shared/tony-history"
    assert {"team-a", "daily", "azkaban_exec_id:42", "azkaban_flow_id:nightly", "azkaban_project:ml",
            "azkaban_job_id:train"} <= set(job.tags)


def test_seed_keys_and_a_packed_environment(tmp_path):
    venv = tmp_path / "env.tar.gz"
    with tarfile.open(venv, "w:gz"):  # an empty but real archive
        pass
    props = {"cluster_requirement": "ps:1,worker:2", "task_memory": "worker:2048", "task_command": "python3 t.py",
             "tensorboard": "true", "output": "hdfs:///o"}
    job = build_job_spec(job_options(props))
    assert job.tasks["worker"].memory_mb == 2048 and job.tensorboard and job.command == "python3 t.py"
    tony = {"executes": "t.py", "python_venv": str(venv), "python_binary_path": "bin/python", "tony.worker.instances": "1"}
    assert build_job_spec(job_options(tony)).command == "venv/bin/python t.py"


@pytest.mark.parametrize("props, line", [
    ({"tony.worker.instances": "1", "tony.worker.memroy": "1g"}, "tony.worker.memroy: unknown task field 'memroy'"),
    ({"tony.worker.instances": "1", "tony.application.nmae": "x"}, "tony.application.nmae: unknown key"),
    ({"tony.worker.instances": "1", "tony.yarn.queu": "x"}, "tony.yarn.queu: unknown key"),
    ({"tony.worker.instances": "1", "executs": "t.py"}, "executs: unknown key; did you mean 'executes'?"),
    ({"tony.worker.memory": "1g", "task_command": "x"}, "tony.worker.instances: missing"),
    ({"tony.worker.instances": "1", "cluster_requirement": "worker:1", "task_command": "x"}, "cluster_requirement"),
    ({"tony.worker.instances": "1", "executes": "t.py", "task_command": "x"}, "executes: give either"),
    ({"tony.worker.instances": "1", "task_params": "--x"}, "task_params: needs executes"),
    ({"tony.worker.instances": "1", "tony.application.timeout": "10m", "task_command": "x"},
     "tony.application.timeout: '10m' is not a number of milliseconds"),
    ({"tony.worker.instances": "1", "worker_env.1X": "y", "task_command": "x"}, "env: '1X' is not a variable name"),
    ({"tony.worker.instances": "1", "tensorboard": "yes", "task_command": "x"}, "tensorboard: 'yes'; allowed"),
    ({"tony.worker.instances": "1", "output": "hdfs:///a", "tensorboard_log_dir": "hdfs:///b", "task_command": "x"},
     "tensorboard log dir"),
])
def test_bad_properties_are_refused_in_one_line(props, line):
    with pytest.raises(UsageError) as err:
        build_job_spec(job_options(props))
    assert str(err.value).startswith(line) and "\n" not in str(err.value)


def test_entry_point_exits_2_with_one_line_and_submits_nothing(tmp_path):
    props = tmp_path / "job.props"
    props.write_text("type=tensorflow\ntony.worker.instances=2\ntony.worker.memroy=4g\n")
    out = tmp_path / "out.json"
    proc = subprocess.run([str(Path(sys.executable).parent / "tony-azkaban")], capture_output=True, text=True,
                          env={"JOB_PROP_FILE": str(props), "JOB_OUTPUT_PROP_FILE": str(out), "PATH": "/usr/bin:/bin",
                               "HADOOP_CONF_DIR": str(tmp_path / "nowhere")})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == ["error: tony.worker.memroy: unknown task field 'memroy'; "
                                                "allowed: instances, memory, vcores, gpus, node-label, command"]
    assert not out.exists()


def test_a_pytorch_job_by_tonys_framework_key_with_torchrun_processes_per_container(tmp_path):
    """Issue #42: TonY's `tony.application.framework`, and torchrun's processes per container."""
    props = _props(tmp_path, "\n".join([
        "type=tensorflow", "tony.application.framework=pytorch", "tony.master.instances=1",
        "tony.worker.instances=2", "nproc_per_node=worker:2", "task_command=torchrun train.py", "elastic=1:2",
        "spares=1",
    ]))
    job = build_job_spec(job_options(props))
    assert job.framework == "pytorch"
    assert (job.tasks["master"].nproc_per_node, job.tasks["worker"].nproc_per_node) == (1, 2)
    assert (job.elastic_min, job.elastic_max, job.spares) == (1, 2, 1)
