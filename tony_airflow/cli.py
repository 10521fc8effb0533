"""`tony`: the command line. Thin: parses, then calls the core or the local cluster.

Exit codes (DESIGN §3.4): 0 success, 1 failure, 2 bad input (one line, nothing done).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Callable, Sequence

from tony_airflow.errors import ClusterError, UsageError


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports bad input as one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def _cluster(args: argparse.Namespace) -> int:
    from tony_airflow.yarn.local import LocalCluster

    cluster = LocalCluster(args.state_dir) if args.state_dir else LocalCluster.default()
    if args.action == "up":
        cluster.up(port_base=args.port_base, timeout=args.timeout, log=_err)
        print(f"Local YARN + HDFS is up ({cluster.state_dir}).")
        print(f"  ResourceManager  {cluster.rm_url}")
        print(f"  NameNode         {cluster.nn_url}")
        print(f"  HADOOP_CONF_DIR  {cluster.conf_dir}")
        print('Use it from a shell with: eval "$(tony cluster env)"')
        return 0
    if args.action == "down":
        cluster.down(log=_err)
        print(f"Local cluster at {cluster.state_dir} is stopped.")
        return 0
    if args.action == "status":
        health = cluster.health()
        for key, value in health.items():
            print(f"{key:16} {value}")
        return 0 if cluster.is_ready() else 1
    if args.action == "env":
        for key, value in cluster.env().items():
            print(f"export {key}={shlex.quote(value)}")
        return 0
    raise UsageError(f"tony cluster: unknown action {args.action!r}")


def _err(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="tony", description="TensorFlow on Apache Hadoop YARN.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    cluster = sub.add_parser("cluster", help="the local single-node YARN + HDFS")
    cluster.add_argument("action", choices=("up", "down", "status", "env"))
    cluster.add_argument("--state-dir", help="where the cluster lives (default: $TONY_CLUSTER_HOME "
                                             "or ~/.local/state/tony-airflow/cluster)")
    cluster.add_argument("--port-base", type=int, default=None,
                         help="use ports BASE..BASE+12 instead of free ones chosen at first start")
    cluster.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for the cluster")
    cluster.set_defaults(func=_cluster)
    return parser


def run(argv: Sequence[str] | None, parser_factory: Callable[[], OneLineParser] = build_parser) -> int:
    """Parse and dispatch; map errors onto exit codes with one line on stderr."""
    try:
        args = parser_factory().parse_args(argv)
        return args.func(args)
    except UsageError as exc:
        _err(f"error: {exc}")
        return 2
    except ClusterError as exc:
        _err(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        return 130


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(argv))


if __name__ == "__main__":
    main()
