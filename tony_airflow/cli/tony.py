"""`tony`: the command line. Thin: parses, then calls the core or the local cluster.

Exit codes (docs/submitting.md, "exit codes"): 0 success, 1 failure, 2 bad input (one line, nothing done), 69 no
cluster reached.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence

from tony_airflow.cli import common
from tony_airflow.cli.common import VERSION, OneLineParser, check_app_id, err, known_report
from tony_airflow.errors import UsageError
from tony_airflow.local.cluster.ha import DEFAULT_NAMESERVICE


def _cluster(args: argparse.Namespace) -> int:
    from tony_airflow.local.cluster import LocalCluster

    cluster = LocalCluster(args.state_dir) if args.state_dir else LocalCluster.default()
    if args.action == "up":
        ha = args.ha if args.ha is not None else (True if args.nameservice else None)  # --nameservice implies --ha
        nameservice = (args.nameservice or DEFAULT_NAMESERVICE) if ha else ("" if ha is False else None)
        cluster.up(port_base=args.port_base, timeout=args.timeout, log=err, gpus=args.gpus, secure=args.secure,
                   nodes=args.nodes, preemption=args.preemption, nameservice=nameservice)
        print(f"Local YARN + HDFS is up ({cluster.state_dir}).")
        if cluster.settings.ha:
            health = cluster.health()
            print(f"  ResourceManagers {', '.join(cluster.rm_urls)} ({health['resourcemanagers']})")
            print(f"  NameNodes        {', '.join(cluster.nn_urls)} ({health['namenodes']})")
            print(f"  HDFS             hdfs://{cluster.settings.nameservice}/ (HA nameservice)")
        else:
            print(f"  ResourceManager  {cluster.rm_url}")
            print(f"  NameNode         {cluster.nn_url}")
        print(f"  HADOOP_CONF_DIR  {cluster.conf_dir}")
        network = cluster.network
        for host in network.hosts if network else ():
            print(f"  Host {host.name:11} {host.address} (network namespace {host.netns}): NodeManager, DataNode")
        if cluster.settings.preemption:
            print("  Queues           default and high, half the cluster each; YARN preempts to give it back")
        if args.docker:
            _engine_up(cluster.state_dir)
        if cluster.secure:
            print(f"  Kerberos         realm of {cluster.kdc.krb5_conf}; user {cluster.kdc.user_principal}, "
                  f"keytab {cluster.kdc.user_keytab}")
        print(env_hint(args.state_dir))
        return 0
    if args.action == "down":
        _engine_down(cluster.state_dir, cluster.nm_local_dirs)
        cluster.down(log=err)
        print(f"Local cluster at {cluster.state_dir} is stopped.")
        return 0
    if args.action == "status":
        health = cluster.health()
        for key, value in health.items():
            print(f"{key:16} {value}")
        return 0 if cluster.is_ready() else 1
    if args.action == "env":
        if not cluster.exists():  # an eval of nothing would leave the shell on whatever cluster it had
            if args.state_dir:
                raise UsageError(f"--state-dir: no local cluster at {cluster.state_dir}; allowed: the --state-dir "
                                 "of a `tony cluster up`")
            raise UsageError(f"no local cluster at {cluster.state_dir}; run `tony cluster up` first, or give "
                             "--state-dir")
        for key, value in cluster.env().items():
            print(f"export {key}={shlex.quote(value)}")
        return 0
    raise UsageError(f"tony cluster: unknown action {args.action!r}")


def env_hint(state_dir: str | None) -> str:
    """The line `tony cluster up` ends with: the `env` command of this very cluster."""
    where = f" --state-dir {shlex.quote(state_dir)}" if state_dir else ""
    return f'Use it from a shell with: eval "$(tony cluster env{where})"'


DOCKERD_PID = "dockerd.pid"  # in the cluster's state dir: a dockerd `up --docker` started, stopped by `down`
DAEMON_JSON_BACKUP = "docker-daemon.json.orig"  # the admin's daemon.json before `up --docker`, put back by `down`


def _engine_up(state_dir) -> None:
    from tony_airflow.local.containers import daemon

    pid = daemon.ensure_running("docker", state_dir / "logs" / "dockerd.log", log=err,
                                backup=state_dir / DAEMON_JSON_BACKUP)
    if pid:
        (state_dir / DOCKERD_PID).write_text(str(pid))
    print("  Docker           dockerd answers (host networking only: no bridge, no firewall rules)")


def _engine_down(state_dir, nm_dirs) -> None:
    from tony_airflow.local.containers import daemon

    removed = daemon.remove_containers_under(nm_dirs)
    if removed:
        err(f"removed {len(removed)} container(s) of the cluster's tasks")
    pid_file = state_dir / DOCKERD_PID
    if pid_file.exists():
        daemon.stop_daemon(int(pid_file.read_text().strip() or 0))
        pid_file.unlink()
    daemon.restore_daemon_json(state_dir / DAEMON_JSON_BACKUP)


def _image(args: argparse.Namespace) -> int:
    from tony_airflow.local.containers import image

    if args.engine not in ("docker", "podman"):
        raise UsageError(f"--engine: {args.engine!r} is not known; allowed: docker, podman")
    if args.engine == "docker":
        from tony_airflow.local.containers import daemon

        if not daemon.answers("docker"):
            raise UsageError("tony image build: the docker daemon does not answer; allowed: start it "
                             "(tony cluster up --docker) or --engine podman")
    print(image.build(args.engine, log=err, force=args.force))
    return 0


def _oozie(args: argparse.Namespace) -> int:
    from tony_airflow.cli.oozie import jar_command, server_command, workflow_command

    commands = {"workflow": workflow_command, "jar": jar_command, "server": server_command}
    return commands[args.what](args.options)


def _status(args: argparse.Namespace) -> int:
    from tony_airflow.core.client import TonyClient
    from tony_airflow.core.presentation import progress_text

    client = TonyClient()
    report = known_report(client, check_app_id(args.application_id))
    print(f"{report.id} {report.state} {report.final_status}")
    if not report.is_terminal:  # the AM's progress: attempt, phase, and why the gang waits
        print(progress_text(report.id, report, client.handle(report.id).progress(report)))
    print(f"Tracking URL: {report.tracking_url}")
    if report.diagnostics:
        print(f"Diagnostics: {report.diagnostics.strip()}")
    return 0


def _kill(args: argparse.Namespace) -> int:
    from tony_airflow.core.client import TonyClient

    client = TonyClient()
    app_id = check_app_id(args.application_id)
    report = known_report(client, app_id)
    if report.is_terminal:
        print(f"{app_id} already ended: {report.state} {report.final_status}")
        return 0
    client.kill(app_id)
    print(f"{app_id} killed")
    return 0


def _follow(args: argparse.Namespace) -> int:
    from tony_airflow.core.client import TonyClient
    from tony_airflow.core.runner import follow_job

    client = TonyClient()
    app_id = check_app_id(args.application_id)
    known_report(client, app_id)
    return follow_job(client, app_id).exit_code


def _tokens(args: argparse.Namespace) -> int:
    from tony_airflow.yarn.delegation import write_tokens
    from tony_airflow.yarn.discovery import discover
    from tony_airflow.yarn.kerberos import KerberosLogin

    cluster = discover()
    if not cluster.hadoop.kerberos:
        raise UsageError(f"tony tokens: the cluster of {cluster.conf_dir} uses simple authentication; "
                         "delegation tokens exist only on a Kerberos cluster")
    tokens = write_tokens(args.out, cluster.hadoop, KerberosLogin(args.principal, args.keytab))
    print(f"Wrote {', '.join(t.kind for t in tokens)} to {args.out}")
    print(f"Hand it to a job with: export HADOOP_TOKEN_FILE_LOCATION={shlex.quote(str(args.out))}")
    return 0


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="tony", description="Training jobs (TensorFlow, PyTorch or any command) on Apache "
                                                    "Hadoop YARN: submit, follow, logs, history, a local cluster.")
    parser.add_argument("--version", action="version", version=VERSION)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    cluster = sub.add_parser("cluster", help="the local YARN + HDFS (one host, or --nodes N)")
    cluster.add_argument("action", choices=("up", "down", "status", "env"))
    cluster.add_argument("--state-dir", help="where the cluster lives (default: $TONY_CLUSTER_HOME "
                                             "or ~/.local/state/tony-airflow/cluster)")
    cluster.add_argument("--port-base", type=int, default=None,
                         help="use ports BASE..BASE+15 instead of free ones chosen at first start")
    cluster.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for the cluster")
    cluster.add_argument("--nodes", type=int, default=None, metavar="N",
                         help="N worker hosts, each a network namespace (198.18.0.0/24, no route out) with its own "
                              "NodeManager and DataNode; ResourceManager and NameNode on the bridge (needs root). "
                              "Default: 1, everything on 127.0.0.1")
    cluster.add_argument("--gpus", type=int, default=None, choices=range(0, 9), metavar="N",
                         help="add a second NodeManager labelled 'gpu' that advertises N GPUs (YARN's GPU "
                              "plugin with a discovery executable; there are no real GPUs)")
    secure = cluster.add_mutually_exclusive_group()
    secure.add_argument("--secure", dest="secure", action="store_true", default=None,
                        help="Kerberos on: a local MIT KDC (realm TONY.TEST), service principals and keytabs "
                             "under the state dir, SPNEGO on every web endpoint")
    secure.add_argument("--no-secure", dest="secure", action="store_false",
                        help="simple authentication (the default for a new cluster)")
    preemption = cluster.add_mutually_exclusive_group()
    preemption.add_argument("--preemption", dest="preemption", action="store_true", default=None,
                            help="two queues, default and high, half the cluster guaranteed to each, and YARN's "
                                 "preemption monitor on: a job in one queue takes its half back from the other")
    preemption.add_argument("--no-preemption", dest="preemption", action="store_false",
                            help="one queue, no preemption (the default for a new cluster)")
    ha = cluster.add_mutually_exclusive_group()
    ha.add_argument("--ha", dest="ha", action="store_true", default=None,
                    help="production shape: two NameNodes of one nameservice (QJM, automatic failover by ZKFC), "
                         "two ResourceManagers (leader election and state in ZooKeeper, work-preserving recovery)")
    ha.add_argument("--no-ha", dest="ha", action="store_false", help="one NameNode, one ResourceManager "
                                                                     "(the default for a new cluster)")
    cluster.add_argument("--nameservice", default=None, help="the HA nameservice (implies --ha): HDFS is "
                                                            f"hdfs://NAME/ (default: {DEFAULT_NAMESERVICE}; a host "
                                                            "name label)")
    cluster.add_argument("--docker", action="store_true",
                         help="make sure the Docker daemon runs (started with no bridge and no firewall rules "
                              "if it does not), for jobs with --docker-image")
    cluster.set_defaults(func=_cluster)
    image = sub.add_parser("image", help="the image the tasks of --docker-image run in, built here")
    image.add_argument("action", choices=("build",))
    image.add_argument("--engine", default="docker", help="docker (default) or podman")
    image.add_argument("--force", action="store_true", help="build again even when nothing changed")
    image.set_defaults(func=_image)

    from tony_airflow.cli.submit import add_submit_options

    add_submit_options(sub.add_parser("submit", help="submit a job (the same options as ytf-submit)"))
    oozie = sub.add_parser("oozie", help="write an Oozie workflow.xml (or action) that runs a training job and "
                                         "the jar of its main class; run a real Oozie server on the local cluster")
    oozie.add_argument("what", choices=("workflow", "jar", "server"))
    oozie.add_argument("options", nargs=argparse.REMAINDER,
                       help="workflow: workflow options and ytf-submit's job options (see `tony oozie workflow "
                            "--help`); jar: DIR; server: up, down or status [--state-dir DIR]")
    oozie.set_defaults(func=_oozie)
    for name, func, text in (("status", _status, "show an application's state"),
                             ("kill", _kill, "kill a running application"),
                             ("follow", _follow, "follow a running job (after --detach): its progress and the "
                                                 "chief's output to its end; Ctrl-C leaves it running")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("application_id")
        cmd.set_defaults(func=func)
    tokens = sub.add_parser("tokens", help="fetch HDFS and RM delegation tokens into a Hadoop token file "
                                           "(what Azkaban or Oozie give their jobs)")
    tokens.add_argument("--out", required=True, help="the token file to write (mode 600)")
    tokens.add_argument("--principal", help="log in as this principal with --keytab (default: the ticket cache)")
    tokens.add_argument("--keytab", help="the keytab of --principal")
    tokens.set_defaults(func=_tokens)
    from tony_airflow.cli.history import add_parsers

    add_parsers(sub)
    return parser


def run(argv: Sequence[str] | None) -> int:
    return common.run(argv, build_parser, usage_when_bare=True)


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(argv))


if __name__ == "__main__":
    main()
