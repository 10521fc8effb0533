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

from tony_airflow.cli.common import ALIASES_NOTE, VERSION, OneLineParser, run, spellings
from tony_airflow.core.client import JobHandle, TonyClient
from tony_airflow.core.presentation import tensorboard_url
from tony_airflow.core.runner import run_to_completion
from tony_airflow.core.spec import CREDENTIAL_KEYS, build_job_spec, load_job_file
from tony_airflow.core.spec_values import parse_env_pairs
from tony_airflow.errors import UsageError
from tony_airflow.yarn.kerberos import KerberosLogin

GROUPS = ("the job", "resources (per task)", "placement", "code and environment", "input and output",
          "containers", "retries and timeouts", "PyTorch")
USAGE = "%(prog)s [options] -r TYPE:N[,TYPE:N...] TASK_COMMAND\n       %(prog)s [options] --conf JOB.yaml"


def add_job_options(p: argparse.ArgumentParser) -> None:
    """The job options shared by `ytf-submit`, `tony submit` and the Oozie generator, in the groups of
    their help. Each takes its dashed spelling and the seed's underscore one (common.spellings)."""
    g = {name: p.add_argument_group(name) for name in GROUPS}
    job = g["the job"]
    job.add_argument("task_command", nargs="?", metavar="TASK_COMMAND",
                     help="the command every task runs")
    job.add_argument(*spellings("-r", "--cluster-requirement"), dest="cluster_requirement", metavar="TYPE:N,...",
                     help="task types and counts, e.g. 'ps:1,worker:4'")
    job.add_argument("--conf", metavar="JOB.yaml", help="a YAML or JSON job file; options override it")
    job.add_argument(*spellings("--framework"), metavar="NAME",
                     help="tensorflow (default), pytorch or generic")
    job.add_argument(*spellings("-n", "--name"), metavar="NAME",
                     help="YARN name (default: the framework or command)")
    job.add_argument("--command", dest="type_commands", action="append", metavar="TYPE=CMD",
                     help="one task type's own command (repeatable)")
    job.add_argument(*spellings("--tracked"), metavar="TYPES",
                     help="types whose exit decides (chief,worker,evaluator)")
    job.add_argument(*spellings("--untracked"), metavar="TYPES",
                     help="types stopped when those end (default: ps)")
    job.add_argument(*spellings("--sidecar"), metavar="TYPES",
                     help="types that never decide (default: tensorboard)")
    job.add_argument(*spellings("--client"), action="store_true", default=None,
                     help="run the chief in this process, the rest on YARN")

    res = g["resources (per task)"]
    res.add_argument(*spellings("-c", "--task-vcores"), dest="task_vcores", action="append", metavar="N",
                     help="vcores: <n>, <type>:<n> or <type>[<index>]:<n>")
    res.add_argument(*spellings("-m", "--task-memory"), dest="task_memory", action="append", metavar="MEM",
                     help="MiB or 4GiB; also <type>:MEM, <type>[<index>]:MEM")
    res.add_argument(*spellings("--task-gpus"), dest="task_gpus", action="append", metavar="N",
                     help="GPUs: <n> or <type>:<n>")

    place = g["placement"]
    place.add_argument(*spellings("-q", "--queue"), metavar="QUEUE", help="YARN queue (default: default)")
    place.add_argument(*spellings("--node-label"), dest="node_label", action="append", metavar="LABEL",
                       help="YARN node label: <label> or <type>:<label>")
    place.add_argument(*spellings("--am-node-label"), dest="am_node_label", metavar="LABEL",
                       help="YARN node label of the AM's container")
    place.add_argument(*spellings("--spread"), action="append", metavar="TYPE",
                       help="one task of TYPE per host (or 'worker,ps')")
    place.add_argument(*spellings("--tags"), metavar="TAGS", help="comma-separated YARN application tags")

    code = g["code and environment"]
    code.add_argument(*spellings("-s", "--script"), metavar="FILE",
                      help="a local file shipped as $DTF_TASK_SCRIPT")
    code.add_argument(*spellings("--src-dir"), dest="src_dir", metavar="DIR",
                      help="a local directory the command runs in")
    code.add_argument("--env", action="append", metavar="K=V", help="an environment variable of every task")
    code.add_argument(*spellings("--python-venv"), dest="python_venv", metavar="TAR",
                      help="a venv-pack .tar.gz whose Python runs the tasks")
    code.add_argument(*spellings("--python"), metavar="PATH",
                      help="the nodes' Python (default: python3)")

    io = g["input and output"]
    io.add_argument(*spellings("-i", "--input"), metavar="PATH", help="input path, set as DTF_INPUT_PATH")
    io.add_argument(*spellings("-o", "--output"), metavar="PATH",
                    help="output path, set as DTF_OUTPUT_PATH")
    io.add_argument(*spellings("-t", "--tensorboard"), action="store_true", default=None,
                    help="a TensorBoard task that reads the output")
    io.add_argument(*spellings("--history-dir"), dest="history_dir", metavar="DIR",
                    help="where the job's events go ($TONY_HISTORY_DIR)")

    box = g["containers"]
    box.add_argument(*spellings("--docker-image"), dest="docker_image", action="append", metavar="IMAGE",
                     help="the tasks' image: <image> or <type>:<image>")
    box.add_argument(*spellings("--docker-runtime"), dest="docker_runtime", metavar="NAME",
                     help="engine (default) or yarn (YARN's own)")
    box.add_argument(*spellings("--docker-engine"), dest="docker_engine", metavar="NAME",
                     help="docker (default) or podman")
    box.add_argument("--mount", dest="docker_mounts", action="append", metavar="SRC:DST[:ro]",
                     help="one more bind mount (repeatable)")
    box.add_argument(*spellings("--docker-user"), dest="docker_user", metavar="UID:GID",
                     help="the numeric uid:gid in the container")

    rt = g["retries and timeouts"]
    rt.add_argument(*spellings("--max-attempts"), dest="max_attempts", type=str, metavar="N",
                    help="whole-cluster attempts (default 1)")
    rt.add_argument(*spellings("--max-free-retries"), dest="max_free_retries", type=str, metavar="N",
                    help="free retries after preemption, lost host (5)")
    rt.add_argument(*spellings("--am-attempts"), dest="am_attempts", type=str, metavar="N",
                    help="AM attempts: a new AM goes on (default 2)")
    rt.add_argument(*spellings("--am-attempts-validity"), dest="am_attempts_validity", type=str, metavar="S",
                    help="seconds an AM failure counts (3600; 0: ever)")
    rt.add_argument(*spellings("--timeout"), type=str, metavar="S",
                    help="application timeout in seconds (default: none)")
    rt.add_argument(*spellings("--allocation-timeout"), dest="allocation_timeout", type=str, metavar="S",
                    help="seconds to get every container (default 300)")
    rt.add_argument(*spellings("--registration-timeout"), dest="registration_timeout", type=str, metavar="S",
                    help="seconds for every task to register (default 300)")
    rt.add_argument(*spellings("--heartbeat-timeout"), dest="heartbeat_timeout", type=str, metavar="S",
                    help="seconds without a heartbeat (default 60)")

    torch = g["PyTorch"]
    torch.add_argument(*spellings("--nproc-per-node"), dest="nproc_per_node", action="append", metavar="N",
                       help="torchrun's processes per container: <n>, <type>:<n>")
    torch.add_argument(*spellings("--elastic"), metavar="MIN:MAX",
                       help="go on with MIN..MAX workers; replace lost ones")
    torch.add_argument(*spellings("--spares"), metavar="N",
                       help="with --elastic: N waiting worker containers that take a lost one's place")


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
        "spares": args.spares,
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
            tracking = handle.status().tracking_url
            print(f"Tracking URL: {tracking or '(once the AM starts)'}", flush=True)
            if job.tensorboard:
                print(f"TensorBoard: {tensorboard_url(tracking) if tracking else '(once the AM starts)'}", flush=True)
            print(f"Left running (--detach): follow it with `tony follow {handle.app_id}`, stop it with "
                  f"`tony kill {handle.app_id}`", flush=True)
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
    return outcome.exit_code  # the runner said how it ended, once


def add_submit_options(p: argparse.ArgumentParser) -> None:
    """`ytf-submit`'s and `tony submit`'s options: the job, who submits it, and whether to stay with it."""
    p.usage = USAGE
    p.epilog = ALIASES_NOTE
    add_job_options(p)
    sec = p.add_argument_group("security")
    sec.add_argument("--principal", metavar="NAME", help="Kerberos principal (default: the ticket cache)")
    sec.add_argument("--keytab", metavar="FILE", help="its keytab (the AM gets it, to renew tokens)")
    wait = p.add_argument_group("waiting and output")
    wait.add_argument(*spellings("--detach", "--no-wait"), dest="no_wait", action="store_true",
                      help="return once submitted; the job runs on")
    wait.add_argument("--follow", dest="follow", action="store_true", default=None,
                      help="print the chief's output (default on a terminal)")
    wait.add_argument("--quiet", dest="follow", action="store_false", help="do not print the tasks' output")
    p.set_defaults(func=submit_and_wait)


def build_parser(prog: str = "ytf-submit") -> OneLineParser:
    p = OneLineParser(prog=prog, description="Submit a training job (TensorFlow, PyTorch or any command) to "
                                             "Apache Hadoop YARN and follow it to its end.")
    p.add_argument("--version", action="version", version=VERSION)
    add_submit_options(p)
    return p


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(argv, build_parser, usage_when_bare=True))
