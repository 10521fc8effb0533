"""Issue #53 items 3 and 7: the help in groups and short, one dashed spelling with the seed's underscore names
still accepted by every front end, the closest name offered for a typo, --version, usage on a bare command."""

from __future__ import annotations

import argparse

import pytest

from tony_airflow import __version__
from tony_airflow.cli import oozie, submit, tony
from tony_airflow.cli.common import is_alias, shown_options
from tony_airflow.core.spec import build_job_spec, load_job_file
from tony_airflow.errors import UsageError

# The seed spec's options (shared/seeds/001, "ytf-submit") and the underscore names of earlier releases:
# (old spelling, value or None for a flag, the dest it sets)
OLD_SPELLINGS = [
    ("--cluster_requirement", "ps:1,worker:2", "cluster_requirement"),
    ("--task_vcores", "2", "task_vcores"),
    ("--task_memory", "4096", "task_memory"),
    ("--input", "/in", "input"),
    ("--output", "/out", "output"),
    ("--script", "x.py", "script"),
    ("--tensorboard", None, "tensorboard"),
    ("--docker_image", "tf:2", "docker_image"),
    ("--queue", "q1", "queue"),
    ("--name", "n1", "name"),
    ("--client", None, "client"),
    ("--task_gpus", "1", "task_gpus"),
    ("--node_label", "gpu", "node_label"),
    ("--src_dir", "/src", "src_dir"),
    ("--docker_runtime", "yarn", "docker_runtime"),
    ("--docker_engine", "podman", "docker_engine"),
    ("--docker_user", "1:1", "docker_user"),
    ("--python_venv", "env.tar.gz", "python_venv"),
    ("--am_node_label", "cpu", "am_node_label"),
    ("--nproc_per_node", "2", "nproc_per_node"),
    ("--max_attempts", "3", "max_attempts"),
    ("--history_dir", "/h", "history_dir"),
]
SHORT = {"--cluster_requirement": "-r", "--task_vcores": "-c", "--task_memory": "-m", "--input": "-i",
         "--output": "-o", "--script": "-s", "--tensorboard": "-t", "--queue": "-q", "--name": "-n"}


def _front_ends() -> dict[str, argparse.ArgumentParser]:
    top = tony.build_parser()
    subs = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return {"ytf-submit": submit.build_parser(), "tony submit": subs.choices["submit"],
            "tony-oozie": oozie.build_parser(), "tony oozie workflow": oozie.workflow_parser()}


@pytest.mark.parametrize("front", list(_front_ends()))
@pytest.mark.parametrize("old, value, dest", OLD_SPELLINGS, ids=[o[0] for o in OLD_SPELLINGS])
def test_every_old_spelling_is_still_accepted(front, old, value, dest):
    parser = _front_ends()[front]
    argv = [old] + ([value] if value is not None else [])
    with_old = vars(parser.parse_args([*argv, "cmd"]))
    dashed = "--" + old[2:].replace("_", "-")
    with_new = vars(parser.parse_args([dashed, *argv[1:], "cmd"]))
    assert with_old[dest] not in (None, False) and with_old == with_new
    if old in SHORT:
        assert vars(parser.parse_args([SHORT[old], *argv[1:], "cmd"])) == with_old


@pytest.mark.parametrize("front", list(_front_ends()))
def test_every_dashed_option_has_its_underscore_twin_and_shows_once(front):
    parser = _front_ends()[front]
    for action in parser._actions:
        for option in action.option_strings:
            if option.startswith("--") and "-" in option[2:]:
                assert "--" + option[2:].replace("-", "_") in action.option_strings, option
        assert not any(is_alias(o, action.option_strings) for o in shown_options(action))
    help_text = parser.format_help()
    assert "--task-gpus" in help_text and "--task_gpus" not in help_text


def test_help_fits_in_100_lines_in_groups(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    text = submit.build_parser().format_help()
    lines = text.splitlines()
    assert len(lines) <= 100, len(lines)
    for group in ("resources (per task):", "placement:", "code and environment:", "input and output:",
                  "containers:", "retries and timeouts:", "security:", "PyTorch:", "waiting and output:"):
        assert group in lines, group
    assert lines[0] == "usage: ytf-submit [options] -r TYPE:N[,TYPE:N...] TASK_COMMAND"
    assert "  -c, --task-vcores N " in text  # each spelling once, the value once
    assert text.count("--task_vcores") == 1  # the aliases, said once


@pytest.mark.parametrize("main, prog", [(submit.main, "ytf-submit"), (tony.main, "tony")])
def test_version(main, prog, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"{prog} {__version__}"


@pytest.mark.parametrize("main, prog", [(submit.main, "ytf-submit"), (tony.main, "tony")])
def test_a_bare_command_prints_its_usage(main, prog, capsys):
    with pytest.raises(SystemExit) as exc:
        main([])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err.startswith(f"usage: {prog} ")
    assert f"`{prog} --help` lists the options" in err


@pytest.mark.parametrize("main, argv, expected", [
    (submit.main, ["--max_attemps", "2", "-r", "worker:1", "x"], "did you mean --max_attempts?"),
    (submit.main, ["--task-gpsu", "2", "-r", "worker:1", "x"], "did you mean --task-gpus?"),
    (tony.main, ["submit", "--docker-imgae", "x", "-r", "worker:1", "x"], "did you mean --docker-image?"),
    (tony.main, ["stauts", "application_1_1"], "did you mean status?"),
    (submit.main, ["-r", "wrker:2", "x"], "cluster_requirement: type 'wrker' is one letter from 'worker'; "
                                          "did you mean worker?"),
    (submit.main, ["-r", "ps:1,workre:2", "x"], "did you mean worker?"),
    (submit.main, ["-r", "chef:1,worker:2", "x"], "did you mean chief?"),
])
def test_a_typo_is_refused_with_the_closest_name(main, argv, expected, capsys, monkeypatch):
    monkeypatch.setattr(submit, "TonyClient", lambda *a, **k: pytest.fail("submitted"))
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1, err
    assert expected in err[0], err[0]


@pytest.mark.parametrize("types", ["ps:1,worker:2", "worker:2,evaluator:1", "chief:1,worker:1", "trainer:2",
                                   "ps:1,work:2,loader:1", "workers_a:1"])
def test_a_type_far_from_the_known_ones_is_kept(types):
    spec = build_job_spec({"cluster_requirement": types, "command": "x"}, check_paths=False)
    assert list(spec.tasks) == [t.split(":")[0] for t in types.split(",")]


def test_a_job_file_typo_names_the_key_it_meant(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("cluster_requirement: worker:1\ntask_memroy: 2048\ncommand: x\n")
    with pytest.raises(UsageError, match="conf: unknown field 'task_memroy'; did you mean 'task_memory'"):
        load_job_file(str(path))
    with pytest.raises(UsageError, match=r"tasks.worker: unknown field 'instnces'; did you mean 'instances'"):
        build_job_spec({"tasks": {"worker": {"instnces": 2}}, "command": "x"}, check_paths=False)
    with pytest.raises(UsageError, match=r"timeouts: unknown key 'hearbeat'; did you mean 'heartbeat'"):
        build_job_spec({"cluster_requirement": "worker:1", "command": "x", "timeouts": {"hearbeat": 5}},
                       check_paths=False)
    path.write_text("surprise: 1\n")  # nothing close: every key, as before
    with pytest.raises(UsageError, match="conf: unknown field 'surprise'; allowed: am_attempts, "):
        load_job_file(str(path))
