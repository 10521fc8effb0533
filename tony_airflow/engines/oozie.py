"""Oozie: the shell action's entry point, and `tony oozie workflow`, which writes that action.

The entry point is what an Oozie shell action runs on its launcher node
(`python3 -m tony_airflow.engines.oozie <ytf-submit options>`). Oozie captures
its stdout as the action's data (`<capture-output/>`, at most 2 KB), so stdout
carries only `application_id`, `tracking_url`, `tensorboard_url` and
`final_status` as key=value lines; everything else goes to stderr. Oozie does
not kill what a shell action starts, so the application is tagged with the
workflow and action ids, and SIGTERM (the launcher container being killed)
kills it.

`tony oozie workflow` takes the same job options as `ytf-submit` and renders a
complete `workflow.xml` (uri:oozie:workflow:0.5 with shell-action:0.3, or
workflow:1.0 with shell-action:1.0) or only the action element.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import jinja2

from tony_airflow.core.runner import Outcome, run_to_completion
from tony_airflow.errors import UsageError
from tony_airflow.yarn.hadoop_conf import read_site

ENTRY_MODULE = "tony_airflow.engines.oozie"
SCHEMAS = {"0.5": "0.3", "1.0": "1.0"}  # workflow schema -> the shell-action schema it is paired with
CAPTURE_LIMIT = 2048  # oozie.action.max.output.data, Oozie's default
ENV_LINK = "tonyenv"  # where a packed launcher environment is unpacked in the launcher's directory


# ----------------------------------------------------------------- entry point
def oozie_tags(env: Mapping[str, str]) -> list[str]:
    """`oozie_workflow_id:…` and `oozie_action_id:…` from the action configuration Oozie hands the launcher."""
    path = env.get("OOZIE_ACTION_CONF_XML")
    if not path:
        return []
    try:
        conf = read_site(Path(path))
    except (OSError, ValueError) as exc:
        raise UsageError(f"OOZIE_ACTION_CONF_XML: cannot read {path}: {exc}") from None
    pairs = (("oozie_workflow_id", conf.get("oozie.job.id")), ("oozie_action_id", conf.get("oozie.action.id")))
    return [f"{tag}:{value}"[:100] for tag, value in pairs if value]


def capture_lines(outcome: Outcome) -> str:
    text = "".join(f"{key}={value}\n" for key, value in outcome.outputs().items())
    assert len(text.encode()) < CAPTURE_LIMIT, "the captured output must stay under Oozie's limit"
    return text


def run_action(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from tony_airflow.submit import job_from_args

    job = job_from_args(args)
    job.tags = list(job.tags) + oozie_tags(env)

    def submitted(app_id: str) -> None:
        print(f"Submitted application {app_id}", file=sys.stderr, flush=True)

    outcome = run_to_completion(job, on_submitted=submitted, log=sys.stderr)
    sys.stdout.write(capture_lines(outcome))
    sys.stdout.flush()
    return outcome.exit_code


def main(argv: Sequence[str] | None = None) -> None:
    from tony_airflow.cli import OneLineParser, run
    from tony_airflow.submit import add_job_options

    def factory() -> OneLineParser:
        p = OneLineParser(prog="tony-oozie", description="Oozie shell action entry point: submit, wait, and "
                                                         "print key=value lines for <capture-output/>.")
        add_job_options(p)
        p.set_defaults(func=lambda a: run_action(a, os.environ))
        return p

    sys.exit(run(argv, factory))


# -------------------------------------------------------------------- generator
def add_generator_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("workflow")
    g.add_argument("--schema", choices=tuple(SCHEMAS), default="1.0",
                   help="workflow schema: 1.0 (Oozie 5, shell-action:1.0) or 0.5 (shell-action:0.3)")
    g.add_argument("--action-only", action="store_true", help="print only the <action> to paste into a workflow")
    g.add_argument("--workflow-name", default="tony-train", help="the workflow-app name")
    g.add_argument("--action-name", default="train", help="the action name (default: train)")
    g.add_argument("--ok", default="end", help="the node after success (default: end)")
    g.add_argument("--error", default="fail", help="the node after failure (default: fail)")
    g.add_argument("--launcher-python", default="python3", help="the Python on the launcher node (default python3)")
    g.add_argument("--launcher-env", help="a packed environment (venv-pack .tar.gz on HDFS) with tony-airflow, "
                                          "shipped as an <archive> and used instead of the node's Python")
    g.add_argument("--file", dest="files", action="append", default=[], metavar="URI",
                   help="a file shipped into the launcher's directory (<file>), e.g. the training script")
    g.add_argument("--launcher-memory", type=int, default=1024, metavar="MB", help="launcher memory (default 1024)")


def _templates() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("tony_airflow.engines", "oozie_templates"),
                              autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def render(gen: argparse.Namespace, job_argv: Sequence[str]) -> str:
    """The action (or the whole workflow) that runs `job_argv` through the entry point."""
    if gen.launcher_env and not gen.launcher_env.endswith((".tar.gz", ".tgz", ".zip")):
        raise UsageError(f"launcher-env: {gen.launcher_env} is not an archive; allowed: a venv-pack .tar.gz")
    for name in ("workflow_name", "action_name", "ok", "error"):
        value = getattr(gen, name)
        if not value or any(c in value for c in "<>&\"' "):
            raise UsageError(f"{name.replace('_', '-')}: {value!r}; allowed: a node name without spaces or XML characters")
    python = f"{ENV_LINK}/bin/python" if gen.launcher_env else gen.launcher_python
    env_vars = [f"PATH=./{ENV_LINK}/bin:$PATH"] if gen.launcher_env else []
    values: dict[str, Any] = {
        "schema": gen.schema, "shell_version": SCHEMAS[gen.schema], "action_name": gen.action_name,
        "exec": python, "arguments": ["-m", ENTRY_MODULE, *job_argv], "env_vars": env_vars, "files": gen.files,
        "archive": gen.launcher_env, "archive_link": ENV_LINK, "ok": gen.ok, "error": gen.error,
        "launcher_memory_mb": gen.launcher_memory, "workflow_name": gen.workflow_name,
    }
    env = _templates()
    action = env.get_template("shell_action.xml.j2").render(**values)
    if gen.action_only:
        return action
    return env.get_template("workflow.xml.j2").render(action=action.rstrip("\n"), **values)


def workflow_command(argv: Sequence[str]) -> int:
    """`tony oozie workflow [workflow options] [ytf-submit options] COMMAND`."""
    from tony_airflow.cli import OneLineParser
    from tony_airflow.submit import add_job_options, job_from_args

    gen_parser = OneLineParser(prog="tony oozie workflow", add_help=False)
    add_generator_options(gen_parser)
    gen, job_argv = gen_parser.parse_known_args(argv)
    job_parser = OneLineParser(prog="tony oozie workflow")
    add_job_options(job_parser)
    add_generator_options(job_parser)
    if "-h" in job_argv or "--help" in job_argv:
        job_parser.print_help()
        return 0
    # validate as the launcher will, except for paths: they name files in the launcher's directory
    job_from_args(job_parser.parse_args(job_argv), check_paths=False)
    if any("${" in a for a in job_argv):
        print("note: ${...} in arguments is Oozie EL, evaluated by Oozie; write shell variables as $NAME",
              file=sys.stderr)
    sys.stdout.write(render(gen, job_argv))
    return 0


if __name__ == "__main__":
    main()
