"""`tony-oozie` (the action's entry point), `tony oozie workflow` (which writes that action), `tony oozie
jar` (the java action's main class) and `tony oozie server` (a real Oozie server on the local cluster).

`python3 -m tony_airflow.cli.oozie <ytf-submit options>` on the launcher node:
submit, wait, and print key=value lines for <capture-output/> on stdout (all
else on stderr; its last line on failure is the reason); engines/oozie.py holds
the Oozie-specific parts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from tony_airflow.cli.common import ALIASES_NOTE, OneLineParser, run, spellings
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


def build_parser() -> OneLineParser:
    """`tony-oozie`, the action's entry point (also the docs' reference)."""
    p = OneLineParser(prog="tony-oozie", description="Oozie action entry point: submit, wait, and "
                                                     "print key=value lines for <capture-output/>.",
                      epilog=ALIASES_NOTE)
    add_job_options(p)
    p.set_defaults(func=lambda a: run_action(a, os.environ))
    return p


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(argv, build_parser))


def workflow_parser() -> OneLineParser:
    """`tony oozie workflow`: the generator's options and the job's (also the docs' reference)."""
    p = OneLineParser(prog="tony oozie workflow", description="Print an Oozie workflow (or one action) that "
                                                              "runs the job given by the ytf-submit options.",
                       epilog=ALIASES_NOTE)
    add_job_options(p)
    add_generator_options(p)
    return p


def add_generator_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("workflow")
    g.add_argument("--schema", choices=tuple(oozie.SCHEMAS), default="1.0",
                   help="workflow schema: 1.0 (Oozie 5, shell-action:1.0) or 0.5 (shell-action:0.3)")
    g.add_argument(*spellings("--action-only"), action="store_true", help="print only the <action> to paste into a workflow")
    g.add_argument(*spellings("--action-type"), choices=oozie.ACTION_TYPES, default="java",
                   help="java (default): tony-airflow's main class runs the job and a failure's one-line reason "
                        "is the action's error message; its jar (tony oozie jar DIR) goes in the application's "
                        "lib/ or --action-jar. shell: Oozie's shell action, no jar (its error message is only "
                        "ShellMain's exit code)")
    g.add_argument(*spellings("--action-jar"), metavar="URI", help=f"where {oozie.JAR_NAME} is (shipped as a <file>), when it "
                                                       "is not in the workflow application's lib/")
    g.add_argument(*spellings("--workflow-name"), default="tony-train", help="the workflow-app name")
    g.add_argument(*spellings("--action-name"), default="train", help="the action name (default: train)")
    g.add_argument("--ok", default="end", help="the node after success (default: end)")
    g.add_argument("--error", default="fail", help="the node after failure (default: fail)")
    g.add_argument(*spellings("--launcher-python"), default="python3", help="the Python on the launcher node (default python3)")
    g.add_argument(*spellings("--launcher-env"), help="a packed environment (venv-pack .tar.gz on HDFS) with tony-airflow, "
                                          "shipped as an <archive> and used instead of the node's Python")
    g.add_argument("--file", dest="files", action="append", default=[], metavar="URI",
                   help="a file shipped into the launcher's directory (<file>), e.g. the training script")
    g.add_argument(*spellings("--launcher-memory"), type=int, default=1024, metavar="MB", help="launcher memory (default 1024)")


def workflow_command(argv: Sequence[str]) -> int:
    """`tony oozie workflow [workflow options] [ytf-submit options] COMMAND`."""
    gen_parser = OneLineParser(prog="tony oozie workflow", add_help=False)
    add_generator_options(gen_parser)
    gen, job_argv = gen_parser.parse_known_args(argv)
    job_parser = workflow_parser()
    if "-h" in job_argv or "--help" in job_argv:
        job_parser.print_help()
        return 0
    # validate as the launcher will, except for paths: they name files in the launcher's directory
    job_from_args(job_parser.parse_args(job_argv), check_paths=False)
    if any("${" in a for a in job_argv):
        print("note: ${...} in arguments is Oozie EL, evaluated by Oozie; write shell variables as $NAME",
              file=sys.stderr)
    rendered = oozie.render(gen, job_argv)
    if gen.action_type == "java" and not gen.action_jar:
        print(f"note: the action's main class is in {oozie.JAR_NAME}: `tony oozie jar <application>/lib` puts it "
              "in the workflow application's lib/ (or pass --action-jar URI)", file=sys.stderr)
    sys.stdout.write(rendered)
    return 0


def jar_command(argv: Sequence[str]) -> int:
    """`tony oozie jar DIR`: the java action's jar, compiled from tony-airflow's source into DIR."""
    from tony_airflow.engines.oozie_jar import build_jar

    parser = OneLineParser(prog="tony oozie jar", description=f"Write {oozie.JAR_NAME} (the main class of the "
                                                               "java action `tony oozie workflow` writes) into DIR, "
                                                               "e.g. the workflow application's lib/.")
    parser.add_argument("dir", metavar="DIR", help="the directory to write it in (made if missing)")
    args = parser.parse_args(list(argv))
    print(build_jar(Path(args.dir)))
    return 0


def server_command(argv: Sequence[str]) -> int:
    """`tony oozie server up|down|status [--state-dir DIR]`: a real Oozie server on the local cluster."""
    from tony_airflow.cli.common import err
    from tony_airflow.local.cluster import LocalCluster
    from tony_airflow.local.cluster.oozie import OozieServer

    parser = OneLineParser(prog="tony oozie server", description="A real Oozie 5.2.1 server on the local cluster.")
    parser.add_argument("action", choices=("up", "down", "status"))
    parser.add_argument("--state-dir", help="the local cluster's state dir (default: as `tony cluster`)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the server")
    args = parser.parse_args(list(argv))
    cluster = LocalCluster(args.state_dir) if args.state_dir else LocalCluster.default()
    server = OozieServer(cluster)
    if args.action == "up":
        started = time.monotonic()
        server.up(log=err, timeout=args.timeout)
        print(f"Oozie {server.version} is up ({time.monotonic() - started:.1f} s): {server.url}")
        print(f"  its CLI   {server.bin_dir / 'oozie'} (OOZIE_URL={server.url})")
        print(f"  sharelib  {server.system_libpath} (HDFS)")
        print(f"  logs      {server.log_dir}")
        return 0
    if args.action == "down":
        server.down()
        print(f"Oozie server of {cluster.state_dir} is stopped.")
        return 0
    status = server.status()
    print(f"oozie            {status}")
    return 0 if status.startswith("running") and status.endswith("NORMAL") else 1


if __name__ == "__main__":
    main()
