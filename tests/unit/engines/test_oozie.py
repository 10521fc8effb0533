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


def test_captured_output_is_four_key_value_lines_under_the_limit():
    long_url = "http://rm.example.com:8088/proxy/application_1700000000000_0001/" + "x" * 300
    text = capture_lines(Outcome("application_1700000000000_0001", "SUCCEEDED", long_url, long_url + "pages/tensorboard/"))
    assert [line.split("=", 1)[0] for line in text.splitlines()] == [
        "application_id", "tracking_url", "tensorboard_url", "final_status"]
    assert len(text.encode()) < CAPTURE_LIMIT


def test_rendered_action_escapes_xml_and_keeps_arguments_verbatim():
    command = 'python3 train.py --filter "a<b && c>d"'
    root = ET.fromstring(render(_gen("--action-only"), ["-r", "worker:2", command]))
    args = [a.text for a in root.findall("s:shell/s:argument", SHELL_NS)]
    assert args == ["-m", "tony_airflow.cli.oozie", "-r", "worker:2", command]
    assert root.find("s:shell/s:capture-output", SHELL_NS) is not None
    assert (root.find("ok").get("to"), root.find("error").get("to")) == ("end", "fail")


def test_packed_launcher_environment_is_an_archive_and_its_python():
    root = ET.fromstring(render(_gen("--action-only", "--launcher-env", "hdfs:///apps/env.tar.gz"), ["x"]))
    assert root.find("s:shell/s:exec", SHELL_NS).text == "tonyenv/bin/python"
    assert root.find("s:shell/s:archive", SHELL_NS).text == "hdfs:///apps/env.tar.gz#tonyenv"


@pytest.mark.parametrize("argv, line", [
    (["--launcher-env", "hdfs:///apps/env"], "launcher-env"),
    (["--action-name", "my train"], "action-name"),
    (["--ok", "a<b"], "ok"),
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
