"""Issue #15: bad input that crashed, hung or was submitted; precedence and per-type commands."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tony_airflow.cli import submit
from tony_airflow.core.spec import JobSpec, build_job_spec
from tony_airflow.errors import UsageError

PAYLOADS = Path(__file__).resolve().parents[2] / "payloads"
SLEEP = str(PAYLOADS / "sleep.py")


def _refuse(argv, capsys, monkeypatch) -> str:
    submitted = []
    monkeypatch.setattr(submit, "TonyClient", lambda *a, **k: submitted.append(a))
    with pytest.raises(SystemExit) as exc:
        submit.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2, err
    assert len(err) == 1, err
    assert not submitted
    return err[0]


# ----------------------------------------------------------------- 2: --command per type
def test_per_type_commands_replace_the_common_command():
    args = submit.build_parser().parse_args(["-r", "ps:1,worker:2", "--command", "ps=serve", "--command",
                                             "worker=train"])
    job = submit.job_from_args(args)
    assert (job.command_of("ps"), job.command_of("worker")) == ("serve", "train")


def test_a_type_without_any_command_is_still_refused(capsys, monkeypatch):
    line = _refuse(["-r", "ps:1,worker:2", "--command", "worker=train"], capsys, monkeypatch)
    assert "task_command: no command for type 'ps'" in line


# ----------------------------------------------------------------- 3: one precedence rule
FIELDS = [  # option name, job-file key in tasks:, option value, own value, TaskSpec attribute, expected values
    ("task_memory", "memory", "1024", 3072, "memory_mb", (1024, 3072)),
    ("task_vcores", "vcores", "2", 3, "vcores", (2, 3)),
    ("task_gpus", "gpus", "2", 1, "gpus", (2, 1)),
    ("node_label", "node_label", "gpu", "fast", "node_label", ("gpu", "fast")),
]


@pytest.mark.parametrize("option,key,option_value,own,attr,expected", FIELDS, ids=[f[0] for f in FIELDS])
def test_resource_precedence_is_the_same_for_every_field(option, key, option_value, own, attr, expected):
    """per-type option > the type's own `tasks:` entry > general option > default, for all four."""
    per_type, own_wins = expected
    base = {"command": "x", "tasks": {"worker": {"instances": 1, key: own}}}
    with_per_type = build_job_spec({**base, option: f"worker:{option_value}"})
    assert getattr(with_per_type.tasks["worker"], attr) == per_type
    with_general = build_job_spec({**base, option: option_value})
    assert getattr(with_general.tasks["worker"], attr) == own_wins


# ----------------------------------------------------------------- 15: impossible sizes
def test_an_astronomical_count_is_refused_at_once(capsys, monkeypatch):
    done: list[str] = []
    worker = threading.Thread(target=lambda: done.append(
        _refuse(["-r", "worker:99999999999999999999", "true"], capsys, monkeypatch)), daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert done, "ytf-submit did not answer within 10 s"
    assert "cluster_requirement (worker)" in done[0] and "at most" in done[0]


def test_check_fits_does_not_walk_every_instance():
    job = build_job_spec({"cluster_requirement": "worker:5000", "command": "x", "task_memory": "worker[3]:9000"})
    with pytest.raises(UsageError, match=r"task_memory: worker\[3\] asks 9000 MiB"):
        job.check_fits(8192, 8)


def test_am_vcores_are_checked_against_the_maximum_allocation():
    job = build_job_spec({"cluster_requirement": "worker:1", "command": "x", "am_vcores": 100})
    with pytest.raises(UsageError, match="am_vcores: 100 vcores is above the maximum allocation 8"):
        job.check_fits(8192, 8)


def test_a_job_larger_than_the_whole_cluster_is_refused():
    job = build_job_spec({"cluster_requirement": "worker:1000", "command": "x", "task_memory": "512"})
    with pytest.raises(UsageError, match=r"cluster_requirement: the job asks .*GiB .*; the cluster has"):
        job.check_capacity({"": (16384, 16)})
    small = build_job_spec({"cluster_requirement": "ps:1,worker:2", "command": "x", "task_memory": "512"})
    small.check_capacity({"": (16384, 16)})
    gpu = build_job_spec({"cluster_requirement": "worker:2", "command": "x", "node_label": "gpu",
                          "task_memory": "4096"})
    with pytest.raises(UsageError, match="node_label 'gpu'"):
        gpu.check_capacity({"": (16384, 16), "gpu": (6000, 16)})


# ----------------------------------------------------------------- 18: HDFS root
@pytest.mark.parametrize("option,path", [("-o", "hdfs://"), ("-o", "hdfs:///"), ("-i", "hdfs:///"),
                                         ("-i", "hdfs://nn:8020"), ("-o", "hdfs://nn:8020/"), ("-o", "/")])
def test_a_root_input_or_output_is_refused(option, path, capsys, monkeypatch):
    line = _refuse(["-r", "worker:1", option, path, "true"], capsys, monkeypatch)
    field = "output" if option == "-o" else "input"
    assert line.startswith(f"error: {field}: ") and "root" in line


# ----------------------------------------------------------------- 20: job files that crashed
def test_job_file_float_memory_is_a_size(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("cluster_requirement: worker:1\ncommand: x\ntask_memory: 1.0e+3\n")
    args = submit.build_parser().parse_args(["--conf", str(path)])
    assert submit.job_from_args(args).tasks["worker"].memory_mb == 1000


@pytest.mark.parametrize("name,content,expected", [
    ("alias", (b"a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
               b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
               b"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
               b"g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
               b"tags: [*h, *h, *h, *h, *h, *h, *h, *h, *h]\n"), "conf: YAML aliases"),
    ("deep", b"tags: " + b"[" * 100_000 + b"]" * 100_000 + b"\n", "conf: "),
    ("latin1", "name: caf\xe9\n".encode("latin-1"), "conf: "),
    ("memory-list", b"cluster_requirement: worker:1\ncommand: x\ntask_memory: {a: 1}\n", "task_memory: "),
])
def test_job_files_that_crashed_are_refused_in_one_line(tmp_path, name, content, expected, capsys, monkeypatch):
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(content)
    assert expected in _refuse(["--conf", str(path)], capsys, monkeypatch)


# ----------------------------------------------------------------- 21: bad input that was submitted
CASES_21 = [
    (["--env", "FOO\n=bar"], "env: 'FOO\\n' is not a variable name"),
    (["--timeout", "nan"], "timeout (application): 'nan' is not a finite number"),
    (["--heartbeat-timeout", "nan"], "timeout (heartbeat): 'nan' is not a finite number"),
    (["--heartbeat-timeout", "inf"], "timeout (heartbeat): 'inf' is not a finite number"),
    (["--python", ""], "python: is empty"),
    (["--history-dir", "file:///"], "history_dir: 'file:///' is the root"),
    (["--history-dir", "hdfs:///"], "history_dir: 'hdfs:///' is the root"),
]


@pytest.mark.parametrize("extra,expected", CASES_21, ids=[c[1].split(":")[0] + repr(c[0][1]) for c in CASES_21])
def test_bad_input_that_was_submitted_is_refused(extra, expected, capsys, monkeypatch):
    assert expected in _refuse(["-r", "worker:1", *extra, "true"], capsys, monkeypatch)


def test_a_type_name_with_a_trailing_newline_is_refused():
    with pytest.raises(UsageError, match="is not a valid type name"):
        build_job_spec({"command": "x", "tasks": {"worker\n": 1}})


@pytest.mark.parametrize("interval,expected", [(1e-9, "at least 0.1"), (120, "below the heartbeat timeout")])
def test_heartbeat_interval_bounds(interval, expected):
    with pytest.raises(UsageError, match=f"heartbeat_interval: .*{expected}"):
        build_job_spec({"cluster_requirement": "worker:1", "command": "x", "heartbeat_interval": interval})


def test_a_text_file_named_like_an_archive_is_not_a_packed_env(tmp_path, capsys, monkeypatch):
    fake = tmp_path / "env.tar.gz"
    fake.write_text("not an archive\n")
    line = _refuse(["-r", "worker:1", "--python_venv", str(fake), "true"], capsys, monkeypatch)
    assert "python_venv: " in line and "not a .tar.gz, .tgz or .zip archive" in line


def test_a_huge_src_dir_is_refused_with_its_size(tmp_path, capsys, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    with open(src / "big.bin", "wb") as fh:  # sparse: no real disk used
        fh.truncate(2 * 2**30)
    line = _refuse(["-r", "worker:1", "--src_dir", str(src), "true"], capsys, monkeypatch)
    assert "src_dir: " in line and "2.0 GiB" in line and "at most 256 MiB" in line


def test_spec_json_still_round_trips():
    job = build_job_spec({"cluster_requirement": "ps:1,worker:2", "command": "x", "task_gpus": "worker:1"})
    assert JobSpec.from_json(job.to_json()) == job


# ------------------------------------------------ issue #30 item 15: what TF_CONFIG cannot express
@pytest.mark.parametrize("argv, expected", [
    (["-r", "chief:2,worker:1"], "cluster_requirement: chief:2 — TensorFlow has at most one chief"),
    (["-r", "evaluator:2,worker:1"], "cluster_requirement: evaluator:2 — TensorFlow has at most one evaluator"),
    (["-r", "master:2,worker:1"], "cluster_requirement: master:2 — TensorFlow has at most one master"),
    (["-r", "chief:1,master:1,worker:1"], "cluster_requirement: chief and master — TensorFlow has one chief"),
    (["-r", "master:2,worker:1", "--framework", "pytorch"],
     "cluster_requirement: master:2 — PyTorch has one master (rank 0)"),
])
def test_what_the_framework_cannot_express_is_refused(argv, expected, capsys, monkeypatch):
    line = _refuse([*argv, "python3 x.py"], capsys, monkeypatch)
    assert line.startswith(f"error: {expected}"), line
    assert "allowed:" in line


def test_one_chief_and_one_evaluator_are_fine():
    for argv in (["-r", "chief:1,worker:2,evaluator:1,ps:1"], ["-r", "master:1,worker:3", "--framework", "pytorch"]):
        submit.job_from_args(submit.build_parser().parse_args([*argv, "python3 x.py"])).validate(check_paths=False)


@pytest.mark.parametrize("value, expected", [
    ("-1", "max_free_retries: -1 is too small; allowed: a whole number from 0 to 100"),
    ("many", "max_free_retries: 'many' is not a whole number; allowed: a whole number from 0 to 100"),
    ("101", "max_free_retries: 101 is too large; allowed: at most 100"),
])
def test_a_bad_free_retry_bound_is_refused(value, expected, capsys, monkeypatch):
    line = _refuse(["-r", "worker:1", "--max-free-retries", value, "python3 x.py"], capsys, monkeypatch)
    assert line == f"error: {expected}", line


def test_free_retries_default_to_five_and_zero_is_allowed():
    parse = submit.build_parser().parse_args
    assert submit.job_from_args(parse(["-r", "worker:1", "x"])).max_free_retries == 5
    assert submit.job_from_args(parse(["-r", "worker:1", "--max-free-retries", "0", "x"])).max_free_retries == 0


# ------------------------------------------------ issue #31 item 4 (first part): image references
@pytest.mark.parametrize("image", ["", "  ", "Not A Valid/Image Name", "Upper", "ubuntu:", "a//b", "-lead",
                                   "tf@sha256:123", "registry:5000/", "x" * 256])
def test_an_image_that_is_not_an_image_reference_is_refused(image, capsys, monkeypatch):
    line = _refuse(["-r", "worker:1", f"--docker_image={image}", "python3 x.py"], capsys, monkeypatch)
    assert line.startswith("error: docker_image: ") and "allowed: an image reference" in line, line


@pytest.mark.parametrize("image", ["debian", "debian:bookworm", "tony-airflow/tensorflow:0.1.0",
                                   "registry.example:5000/ml/tensorflow:2.21", "localhost/a_b__c-d.e:v1.2-rc",
                                   "tf@sha256:" + "a" * 64, "[::1]:5000/ml/tf:latest"])
def test_image_references_the_engines_accept_are_accepted(image):
    parse = submit.build_parser().parse_args
    job = submit.job_from_args(parse(["-r", "worker:1", "--docker_image", image, "x"]))
    job.validate(check_paths=False)
    assert job.docker_image == image
