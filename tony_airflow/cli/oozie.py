"""`tony-oozie` (the shell action's entry point) and `tony oozie workflow` (which writes that action).

`python3 -m tony_airflow.cli.oozie <ytf-submit options>` on the launcher node:
submit, wait, and print key=value lines for <capture-output/> on stdout (all
else on stderr); engines/oozie.py holds the Oozie-specific parts.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence

from tony_airflow.cli.common import OneLineParser, run
from tony_airflow.cli.submit import add_job_options, job_from_args
from tony_airflow.core.runner import run_to_completion
from tony_airflow.engines import oozie


def run_action(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    job = job_from_args(args)
    identity = oozie.oozie_tags(env)  # the workflow and action: the same in a retry of the action
    job.tags = list(job.tags) + identity

    def submitted(app_id: str) -> None:
        print(f"Submitted application {app_id}", file=sys.stderr, flush=True)

    outcome = run_to_completion(job, on_submitted=submitted, log=sys.stderr, identity=identity)
    sys.stdout.write(oozie.capture_lines(outcome))
    sys.stdout.flush()
    return outcome.exit_code


def main(argv: Sequence[str] | None = None) -> None:
    def factory() -> OneLineParser:
        p = OneLineParser(prog="tony-oozie", description="Oozie shell action entry point: submit, wait, and "
                                                         "print key=value lines for <capture-output/>.")
        add_job_options(p)
        p.set_defaults(func=lambda a: run_action(a, os.environ))
        return p

    sys.exit(run(argv, factory))


def add_generator_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("workflow")
    g.add_argument("--schema", choices=tuple(oozie.SCHEMAS), default="1.0",
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


def workflow_command(argv: Sequence[str]) -> int:
    """`tony oozie workflow [workflow options] [ytf-submit options] COMMAND`."""
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
    sys.stdout.write(oozie.render(gen, job_argv))
    return 0


if __name__ == "__main__":
    main()
