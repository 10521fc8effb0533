"""`ytf-submit` / `tony submit`: the command line of docs/submitting.md, over the core client.

Parses options into the job spec, submits, prints the application id and the
tracking URL as soon as they exist, shows progress, and exits 0 (SUCCEEDED),
1 (FAILED or KILLED) or 2 (bad input, nothing submitted).
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from typing import Any

from tony_airflow.cli.common import OneLineParser, run
from tony_airflow.core.client import JobHandle, TonyClient
from tony_airflow.core.runner import run_to_completion
from tony_airflow.core.spec import CREDENTIAL_KEYS, build_job_spec, load_job_file
from tony_airflow.core.spec_values import parse_env_pairs
from tony_airflow.errors import UsageError
from tony_airflow.yarn.kerberos import KerberosLogin


def add_job_options(p: argparse.ArgumentParser) -> None:
    """The job options shared by `ytf-submit`, `tony submit` and the Oozie generator."""
    p.add_argument("task_command", nargs="?", help="the command every task runs (DTF_* variables are set)")
    p.add_argument("-r", "--cluster_requirement", help="task types and counts, e.g. 'ps:1,worker:4'")
    p.add_argument("-c", "--task_vcores", action="append",
                   help="vcores: '<n>', '<type>:<n>' or '<type>[<index>]:<n>' (repeatable)")
    p.add_argument("-m", "--task_memory", action="append",
                   help="memory in MiB or with a unit: '2048', 'worker:4 GiB', 'worker[0]:8192' (repeatable)")
    p.add_argument("--task_gpus", action="append", help="GPUs: '<n>' or '<type>:<n>' (repeatable)")
    p.add_argument("--node_label", action="append", help="YARN node label: '<label>' or '<type>:<label>'")
    p.add_argument("--spread", action="append",
                   help="a task type placed one task per host (repeatable, or 'worker,ps')")
    p.add_argument("--am_node_label", "--am-node-label", help="YARN node label for the AM's container")
    p.add_argument("-i", "--input", help="input path, set as DTF_INPUT_PATH")
    p.add_argument("-o", "--output", help="output path, set as DTF_OUTPUT_PATH (needed by --tensorboard)")
    p.add_argument("-s", "--script", help="a local file shipped to every task; its path is DTF_TASK_SCRIPT")
    p.add_argument("--src_dir", help="a local directory shipped to every task; the command runs inside it")
    p.add_argument("-t", "--tensorboard", action="store_true", default=None, help="start a TensorBoard task")
    p.add_argument("--docker_image", action="append",
                   help="run the tasks in this image: 'IMAGE' or 'TYPE:IMAGE' (repeatable; the type's own wins)")
    p.add_argument("--docker_runtime", help="engine (default: the node's docker or podman runs the command) or "
                                            "yarn (YARN's Docker runtime, LinuxContainerExecutor)")
    p.add_argument("--docker_engine", help="docker (default) or podman, for --docker_runtime engine")
    p.add_argument("--mount", dest="docker_mounts", action="append", metavar="SRC:DST[:ro]",
                   help="one more bind mount into the tasks' containers (repeatable)")
    p.add_argument("--docker_user", "--docker-user", dest="docker_user",
                   metavar="UID:GID", help="the numeric uid:gid the command runs as in its container (default: "
                                           "the YARN container's)")
    p.add_argument("--python_venv", help="a packed Python environment (venv-pack .tar.gz, local or hdfs://) "
                                         "whose Python runs the task command")
    p.add_argument("-q", "--queue", help="YARN queue (default: default)")
    p.add_argument("-n", "--name", help="YARN application name (default: TensorFlow)")
    p.add_argument("--client", action="store_true", default=None,
                   help="run the chief here, in this process, while the other tasks run on YARN")
    p.add_argument("--conf", help="a YAML or JSON job file with the same fields; options override it")
    p.add_argument("--env", action="append", metavar="K=V", help="environment variable for every task")
    p.add_argument("--command", dest="type_commands", action="append", metavar="TYPE=CMD",
                   help="a command for one task type, overriding task_command for it")
    p.add_argument("--max-attempts", dest="max_attempts", type=str, help="whole-cluster attempts (default 1)")
    p.add_argument("--max-free-retries", dest="max_free_retries", type=str,
                   help="retries after a preemption or a lost host that do not count as attempts (default 5)")
    p.add_argument("--am-attempts", dest="am_attempts", type=str,
                   help="YARN application attempts: a lost AM starts a new one that goes on (default 2, at most "
                        "the RM's yarn.resourcemanager.am.max-attempts)")
    p.add_argument("--am-attempts-validity", dest="am_attempts_validity", type=str,
                   help="seconds an AM failure counts against --am-attempts (default 3600; 0: for ever)")
    p.add_argument("--timeout", type=str, help="application timeout in seconds (default: none)")
    p.add_argument("--allocation-timeout", type=str, help="seconds to get every container (default 300)")
    p.add_argument("--registration-timeout", type=str, help="seconds for every task to register (default 300)")
    p.add_argument("--heartbeat-timeout", type=str, help="seconds without a heartbeat (default 60)")
    p.add_argument("--tracked", help="types whose exit decides the outcome (default: chief,worker,evaluator)")
    p.add_argument("--untracked", help="types stopped when the tracked ones are done (default: ps)")
    p.add_argument("--sidecar", help="types that never decide the outcome (default: tensorboard)")
    p.add_argument("--tags", help="comma-separated YARN application tags")
    p.add_argument("--python", help="the Python on the nodes that runs the executor (default: python3)")
    p.add_argument("--framework", help="tensorflow (default), pytorch or generic")
    p.add_argument("--nproc_per_node", "--nproc-per-node", action="append",
                   help="PyTorch: processes torchrun starts per container, '<n>' or '<type>:<n>' (default 1)")
    p.add_argument("--elastic", metavar="MIN:MAX",
                   help="PyTorch: run on while MIN..MAX workers live; a lost worker's container is replaced "
                        "without restarting the others (MAX: the number of workers)")
    p.add_argument("--history-dir", dest="history_dir",
                   help="where the AM writes the job's event log (default: $TONY_HISTORY_DIR or "
                        "/tmp/tony-history on HDFS)")


def options_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """Namespace -> the job-file keys of core.spec, the job file first, options over it."""
    opts: dict[str, Any] = load_job_file(args.conf) if args.conf else {}
    simple = {
        "cluster_requirement": args.cluster_requirement, "command": args.task_command,
        "task_vcores": args.task_vcores, "task_memory": args.task_memory, "task_gpus": args.task_gpus,
        "node_label": args.node_label, "input": args.input, "output": args.output, "script": args.script,
        "src_dir": args.src_dir, "tensorboard": args.tensorboard, "docker_image": args.docker_image,
        "docker_runtime": args.docker_runtime, "docker_engine": args.docker_engine,
        "docker_mounts": args.docker_mounts, "docker_user": args.docker_user,
        "python_venv": args.python_venv, "client": args.client,
        "queue": args.queue, "name": args.name, "max_attempts": args.max_attempts,
        "max_free_retries": args.max_free_retries, "am_attempts": args.am_attempts,
        "am_attempts_validity": args.am_attempts_validity,
        "tracked": args.tracked, "untracked": args.untracked, "sidecar": args.sidecar, "tags": args.tags,
        "python": args.python, "framework": args.framework, "history_dir": args.history_dir,
        "spread": ",".join(args.spread) if args.spread else None, "am_node_label": args.am_node_label,
        "nproc_per_node": args.nproc_per_node, "elastic": args.elastic,
    }
    for key, value in simple.items():
        if value is not None:
            if key == "cluster_requirement":
                opts.pop("tasks", None)
            opts[key] = value
    if args.env:
        opts["env"] = {**(opts.get("env") or {}), **parse_env_pairs(args.env)}
    timeouts = dict(opts.get("timeouts") or {})
    for key, value in (("application", args.timeout), ("allocation", args.allocation_timeout),
                       ("registration", args.registration_timeout), ("heartbeat", args.heartbeat_timeout)):
        if value is not None:
            timeouts[key] = value
    if timeouts:
        opts["timeouts"] = timeouts
    if args.type_commands:
        opts["_type_commands"] = args.type_commands
    return opts


def login_from_args(args: argparse.Namespace, opts: dict[str, Any] | None = None) -> KerberosLogin:
    """--principal/--keytab over the job file's `principal`/`keytab` (in `opts` when the caller read
    them already); neither: the ticket cache (or tokens)."""
    found = opts if opts is not None else (load_job_file(args.conf) if args.conf else {})
    principal = getattr(args, "principal", None) or found.get("principal")
    keytab = getattr(args, "keytab", None) or found.get("keytab")
    for key, value in (("principal", principal), ("keytab", keytab)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise UsageError(f"{key}: {value!r}; allowed: a non-empty string")
    return KerberosLogin(principal, keytab)


def job_from_args(args: argparse.Namespace, check_paths: bool = True, opts: dict[str, Any] | None = None):
    opts = dict(opts) if opts is not None else options_from_args(args)
    for key in CREDENTIAL_KEYS:
        opts.pop(key, None)
    per_type: dict[str, str] = {}
    for pair in opts.pop("_type_commands", None) or []:
        name, sep, command = pair.partition("=")
        if not sep or not name.strip() or not command.strip():
            raise UsageError(f"--command: {pair!r} is malformed; allowed: TYPE=COMMAND")
        per_type[name.strip()] = command
    return build_job_spec(opts, check_paths=check_paths, type_commands=per_type)


def submit_and_wait(args: argparse.Namespace) -> int:
    """Submit and follow the job to its end. Ctrl-C (or SIGTERM) kills the application before
    exiting 130 (143); `--detach`/`--no-wait` returns once it is submitted and leaves it running."""
    opts = options_from_args(args)
    job = job_from_args(args, opts=opts)
    login = login_from_args(args, opts)
    make_client = functools.partial(TonyClient, principal=login.principal, keytab=login.keytab)
    if job.client_mode and args.no_wait:
        raise UsageError("client: --client runs the chief in this process, so it cannot be used with --no-wait")
    if args.no_wait:
        with make_client() as client:
            handle = client.submit(job)
            print(f"Submitted application {handle.app_id}", flush=True)
            print(f"Tracking URL: {handle.status().tracking_url or '(once the AM starts)'}", flush=True)
            print(f"Left running (--detach): stop it with `tony kill {handle.app_id}`", flush=True)
            return 0

    def submitted(app_id: str) -> None:
        print(f"Submitted application {app_id}", flush=True)
        if job.client_mode:
            print(f"Running {', '.join(job.local_types())} here (client mode)", flush=True)

    def local_tasks(handle: JobHandle) -> None:
        if job.client_mode:
            handle.run_local_tasks()

    # the chief's output as it comes: by default on a terminal; in client mode the chief prints here anyway
    follow = (sys.stdout.isatty() if args.follow is None else args.follow) and not job.client_mode
    outcome = run_to_completion(job, submitted, log=sys.stderr, out=sys.stdout, client_factory=make_client,
                                while_running=local_tasks, follow=follow)
    if outcome.final_status == "SUCCEEDED" and not outcome.terminated:
        print(f"{outcome.application_id} SUCCEEDED", flush=True)
    return outcome.exit_code


def add_submit_options(p: argparse.ArgumentParser) -> None:
    """`ytf-submit`'s and `tony submit`'s options: the job, and whether to stay with it."""
    add_job_options(p)
    p.add_argument("--principal", help="Kerberos principal to submit as, with --keytab (default: the ticket "
                                       "cache of `kinit`, or the Hadoop tokens of HADOOP_TOKEN_FILE_LOCATION)")
    p.add_argument("--keytab", help="the keytab of --principal: the client logs in with it, and the job's AM alone "
                   "gets it (a private file) to obtain new HDFS tokens during the job")
    p.add_argument("--no-wait", "--detach", dest="no_wait", action="store_true",
                   help="return once the application is submitted and leave it running "
                        "(without it, Ctrl-C kills the application)")
    p.add_argument("--follow", dest="follow", action="store_true", default=None,
                   help="print the chief's (or worker 0's) output as it comes, and the failing task's last lines "
                        "(default on a terminal)")
    p.add_argument("--quiet", dest="follow", action="store_false", help="do not print the tasks' output")
    p.set_defaults(func=submit_and_wait)


def build_parser(prog: str = "ytf-submit") -> OneLineParser:
    p = OneLineParser(prog=prog, description="Submit a TensorFlow job to Apache Hadoop YARN.")
    add_submit_options(p)
    return p


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(argv, build_parser))
