"""The Oozie entry point's pieces that need no cluster: tags from the action conf, the captured lines,
and the generator's rendering (escaping, the packed-environment variant)."""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET

import pytest

from tony_airflow.cli.oozie import add_generator_options
from tony_airflow.core.runner import Outcome
from tony_airflow.engines.oozie import CAPTURE_LIMIT, capture_lines, oozie_tags, render
from tony_airflow.errors import UsageError
from tony_airflow.yarn.hadoop_conf import write_site

SHELL_NS = {"s": "uri:oozie:shell-action:1.0", "w": "uri:oozie:workflow:1.0"}


def _gen(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_generator_options(p)
    return p.parse_args(list(argv))


def test_tags_come_from_the_action_configuration(tmp_path):
    conf = tmp_path / "action.xml"
    write_site(conf, {"oozie.job.id": "0000007-260101-oozie-oozi-W", "oozie.action.id": "0000007-260101-oozie-oozi-W@train"})
    assert oozie_tags({"OOZIE_ACTION_CONF_XML": str(conf)}) == [
        "oozie_workflow_id:0000007-260101-oozie-oozi-W", "oozie_action_id:0000007-260101-oozie-oozi-W@train"]
    assert oozie_tags({}) == []


def test_the_tag_oozie_kills_children_by_is_carried_as_it_is(tmp_path):
    """Oozie 5 hands the launcher `oozie.child.mapreduce.job.tags` and, when it kills the action, kills every
    YARN application carrying that tag (JavaActionExecutor.killExternalChildAppByTags): the training is one."""
    conf = tmp_path / "action.xml"
    write_site(conf, {"oozie.job.id": "0000007-260101-oozie-oozi-W", "oozie.action.id": "0000007-260101-oozie-oozi-W@train",
                      "oozie.child.mapreduce.job.tags": "oozie-1c2f0a9be8e0b7f4a41c3c62f8d5b0e1"})
    assert oozie_tags({"OOZIE_ACTION_CONF_XML": str(conf)})[-1] == "oozie-1c2f0a9be8e0b7f4a41c3c62f8d5b0e1"


def test_captured_output_is_four_key_value_lines_under_the_limit():
    long_url = "http://rm.example.com:8088/proxy/application_1700000000000_0001/" + "x" * 300
    text = capture_lines(Outcome("application_1700000000000_0001", "SUCCEEDED", long_url, long_url + "pages/tensorboard/"))
    assert [line.split("=", 1)[0] for line in text.splitlines()] == [
        "application_id", "tracking_url", "tensorboard_url", "final_status"]
    assert len(text.encode()) < CAPTURE_LIMIT


def test_rendered_action_escapes_xml_and_keeps_arguments_verbatim():
    command = 'python3 train.py --filter "a<b && c>d"'
    root = ET.fromstring(render(_gen("--action-only", "--action-type", "shell"), ["-r", "worker:2", command]))
    args = [a.text for a in root.findall("s:shell/s:argument", SHELL_NS)]
    assert args == ["-m", "tony_airflow.cli.oozie", "-r", "worker:2", command]
    assert root.find("s:shell/s:capture-output", SHELL_NS) is not None
    assert (root.find("ok").get("to"), root.find("error").get("to")) == ("end", "fail")


def test_packed_launcher_environment_is_an_archive_and_its_python():
    shell = ET.fromstring(render(_gen("--action-only", "--action-type", "shell", "--launcher-env",
                                      "hdfs:///apps/env.tar.gz"), ["x"]))
    assert shell.find("s:shell/s:exec", SHELL_NS).text == "tonyenv/bin/python"
    assert shell.find("s:shell/s:archive", SHELL_NS).text == "hdfs:///apps/env.tar.gz#tonyenv"
    java = ET.fromstring(render(_gen("--action-only", "--launcher-env", "hdfs:///apps/env.tar.gz"), ["x"]))
    assert [a.text for a in java.findall("java/arg")][:3] == ["tonyenv/bin/python", "-m", "tony_airflow.cli.oozie"]
    assert java.find("java/archive").text == "hdfs:///apps/env.tar.gz#tonyenv"


def test_the_default_action_is_java_with_tony_airflows_main_class_and_the_command_as_its_args():
    """A <java> action (no namespace of its own: the workflow's), the entry point as its arguments, the jar
    shipped as a <file> when --action-jar names it (else it is in the application's lib/)."""
    command = 'python3 train.py --filter "a<b && c>d"'
    root = ET.fromstring(render(_gen("--action-only"), ["-r", "worker:2", command]))
    assert root.find("java/main-class").text == "tony.oozie.ActionMain"
    assert [a.text for a in root.findall("java/arg")] == [
        "python3", "-m", "tony_airflow.cli.oozie", "-r", "worker:2", command]
    assert root.find("java/capture-output") is not None and root.find("java/file") is None
    shipped = ET.fromstring(render(_gen("--action-only", "--action-jar", "hdfs:///apps/tony-oozie-action.jar",
                                        "--file", "hdfs:///apps/train.py"), ["x"]))
    assert [f.text for f in shipped.findall("java/file")] == ["hdfs:///apps/train.py", "hdfs:///apps/tony-oozie-action.jar"]


@pytest.mark.parametrize("argv, line", [
    (["--launcher-env", "hdfs:///apps/env"], "launcher-env"),
    (["--action-name", "my train"], "action-name"),
    (["--ok", "a<b"], "ok"),
    (["--action-jar", "hdfs:///apps/tony.zip"], "action-jar"),
])
def test_generator_refuses_bad_options_in_one_line(argv, line):
    with pytest.raises(UsageError) as err:
        render(_gen(*argv), ["x"])
    assert str(err.value).startswith(line) and "\n" not in str(err.value)


def test_entry_point_refuses_bad_options_with_exit_2_and_nothing_on_stdout(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    proc = subprocess.run([str(Path(sys.executable).parent / "tony-oozie"), "-r", "worker:zero", "python3 t.py"],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin",
                                                               "HADOOP_CONF_DIR": str(tmp_path / "nowhere")})
    assert proc.returncode == 2 and proc.stdout == ""  # stdout is Oozie's captured action data
    assert proc.stderr.strip().splitlines() == [
        "error: cluster_requirement (worker): 'zero' is not a whole number; allowed: a whole number from 1 to 10000"]


@pytest.mark.parametrize("argv, line", [
    (["bogus"], "error: tony oozie server: argument action: invalid choice: 'bogus' (choose from 'up', 'down', "
                "'status')"),
    (["up", "--state-dir", "{tmp}/none"], "error: tony oozie server: the local cluster at {tmp}/none is not running; "
                                          "allowed: start it first (tony cluster up)"),
])
def test_oozie_server_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, line):
    from tony_airflow.cli import tony

    code = tony.run(["oozie", "server", *(a.format(tmp=tmp_path) for a in argv)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.strip().splitlines() == [line.format(tmp=tmp_path)]
    assert not (tmp_path / "none").exists()  # nothing made


@pytest.mark.parametrize("argv, line", [
    (["jar"], "error: tony oozie jar: the following arguments are required: DIR"),
    (["jar", "/etc/hostname"], "error: DIR: /etc/hostname is a file; allowed: a directory (made if missing), e.g. "
                               "the workflow application's lib/"),
    (["workflow", "--action-type", "perl", "-r", "worker:1", "x"],
     "error: tony oozie workflow: argument --action-type: invalid choice: 'perl' (choose from 'java', 'shell')"),
    (["workflow", "--action-jar", "hdfs:///x.zip", "-r", "worker:1", "x"],
     "error: action-jar: hdfs:///x.zip is not a .jar; allowed: the URI of tony-oozie-action.jar (tony oozie jar "
     "DIR writes it)"),
])
def test_oozie_jar_and_action_options_bad_input_is_one_line_and_exit_2(capsys, argv, line):
    from tony_airflow.cli import tony

    code = tony.run(["oozie", *argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.strip().splitlines() == [line]


def test_a_pytorch_action_carries_its_framework_and_processes_per_container(capsys):
    """Issue #42: the generator validates as the launcher will and keeps the options in the action."""
    from tony_airflow.cli.oozie import workflow_command

    assert workflow_command(["--action-only", "-r", "master:1,worker:2", "--framework", "pytorch",
                             "--nproc_per_node", "worker:2", "torchrun train.py"]) == 0
    args = [a.text for a in ET.fromstring(capsys.readouterr().out).findall("java/arg")]
    assert args[3:] == ["-r", "master:1,worker:2", "--framework", "pytorch", "--nproc_per_node", "worker:2",
                        "torchrun train.py"]
