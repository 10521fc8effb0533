"""`tony history …` and `tony logs`: thin commands over core.history and Hadoop's log reader."""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from typing import Any

from tony_airflow.cli.common import check_app_id
from tony_airflow.errors import UsageError

TASK = re.compile(r"[a-z][a-z0-9_]*:\d+")  # fullmatch
AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_AGE_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
DEFAULT_MAX_AGE = "30d"
DEFAULT_PORT = 19886


def parse_age(text: str, field: str = "max-age") -> float:
    match = AGE.match(text or "")
    if not match or float(match[1]) <= 0:
        raise UsageError(f"{field}: {text!r} is not an age; allowed: a positive number with s, m, h or d, "
                         "e.g. 30d or 12h")
    return float(match[1]) * _AGE_UNIT[match[2]]


def _store(args: argparse.Namespace):
    from tony_airflow.core.history.store import HistoryStore, history_dir
    from tony_airflow.core.spec_values import check_history_dir

    directory = check_history_dir(history_dir(args.history_dir), "history-dir")
    return HistoryStore.open(directory)  # without a cluster: yarn.discovery's one line


def _rm() -> Any:
    """The ResourceManager, to tell a running job from one whose AM died; None if unreachable."""
    try:
        from tony_airflow.core.client import TonyClient

        return TonyClient().rm
    except Exception:
        return None


def _list(args: argparse.Namespace) -> int:
    from tony_airflow.core.history import reader, text

    store = _store(args)
    jobs = reader.JobCache(store, _rm()).jobs()
    if not jobs:
        print(f"no jobs in {store.root}")
        return 0
    print(text.jobs_table(jobs))
    return 0


def _show(args: argparse.Namespace) -> int:
    from tony_airflow.core.history import reader, text

    app_id = check_app_id(args.application_id)
    store = _store(args)
    job = reader.load_by_id(store, app_id, _rm())
    if job is None:
        print(f"error: no history for {app_id} in {store.root}", file=sys.stderr)
        return 1
    print(text.job_report(job, with_events=not args.no_events))
    return 0


def _purge(args: argparse.Namespace) -> int:
    max_age = parse_age(args.max_age)
    purged = _store(args).purge(max_age)
    print(f"purged {len(purged)} job(s){': ' + ', '.join(purged) if purged else ''}")
    return 0


# libraries that log each request they send at INFO: the server's page views ask the RM and WebHDFS, and a
# line per request buried the purges and failures (issue #53 item 7)
CHATTY_LOGGERS = ("httpx", "httpcore", "urllib3", "requests_kerberos", "fsspec")


def server_logging() -> None:
    """INFO for the server's own lines (the URL, purges, failures), WARNING for the HTTP clients under it."""
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def _serve(args: argparse.Namespace) -> int:
    from tony_airflow.core.history import web

    max_age = parse_age(args.max_age) if args.max_age != "0" else None
    interval = parse_age(args.purge_interval, "purge-interval")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"port: {args.port} is out of range; allowed: 0..65535")
    server_logging()
    app = web.build_app(_store(args), _rm(), max_age, interval)

    def ready(url: str) -> None:
        print(f"History server: {url}", flush=True)

    try:
        asyncio.run(web.serve(app, args.host, args.port, ready))
    except KeyboardInterrupt:
        pass
    return 0


def _logs(args: argparse.Namespace) -> int:
    from tony_airflow.yarn import logs

    app_id = check_app_id(args.application_id)
    if args.follow:
        if args.task or args.raw or args.all_files or args.attempt is not None:
            raise UsageError("follow: follows the chief's (or worker 0's) output alone; allowed: -f without "
                             "--task, --attempt, --raw and --all-files")
        from tony_airflow.cli.common import known_report
        from tony_airflow.core.client import TonyClient
        from tony_airflow.core.runner import follow_job

        client = TonyClient()
        known_report(client, app_id)
        return follow_job(client, app_id).exit_code
    if not args.task:
        if args.attempt is not None:
            raise UsageError("attempt: needs --task; allowed: --task TYPE:INDEX --attempt N")
        if args.all_files:
            raise UsageError("all-files: needs --task; allowed: --task TYPE:INDEX --all-files, or --raw for "
                             "every file of every container")
        _await_aggregation(app_id)
        return logs.print_logs(app_id) if args.raw else _task_output(app_id)
    if not TASK.fullmatch(args.task):
        raise UsageError(f"task: {args.task!r} is malformed; allowed: TYPE:INDEX such as worker:0")
    from tony_airflow.core.history import reader

    store = _store(args)
    job = reader.load_by_id(store, app_id, with_spec=False)
    if job is None:
        print(f"error: no history for {app_id} in {store.root}, so its tasks' containers are unknown; "
              f"`tony logs {app_id}` prints every container", file=sys.stderr)
        return 1
    runs = job.runs_of(args.task)
    if not runs:
        known = sorted({t for a in job.attempts for t in a.tasks})
        raise UsageError(f"task: {args.task} is not a task of {app_id}; allowed: {', '.join(known)}")
    if args.attempt is not None:
        runs = [r for r in runs if r.attempt == args.attempt]
        if not runs:
            raise UsageError(f"attempt: {app_id} has no attempt {args.attempt}; allowed: 1..{len(job.attempts)}")
    _await_aggregation(app_id)
    code = 0
    for run in runs:
        if not run.container_id:
            print(f"==> {run.task} attempt {run.attempt}: never got a container <==", flush=True)
            continue
        print(f"==> {run.banner()} <==", flush=True)
        pattern = None if args.all_files else logs.TASK_LOG_PATTERN
        code = logs.print_logs(app_id, run.container_id, pattern) or code
    return code


def _await_aggregation(app_id: str) -> None:
    """Right after a job ends, `yarn logs` prints the nodes that uploaded so far, without a word (on three hosts
    the chief's node was often missing): wait until the RM says the upload is over, or say in one line that
    what follows may miss some."""
    from tony_airflow.yarn.logs import AGGREGATION_WAIT_S, wait_until_aggregated

    rm = _rm()
    if rm is None:
        return
    left = wait_until_aggregated(lambda: rm.application(app_id))
    if left is not None:
        print(f"note: YARN has not finished collecting the logs of {app_id} (log aggregation {left} after "
              f"{AGGREGATION_WAIT_S:.0f}s): some containers' logs may be missing; run `tony logs` again later",
              file=sys.stderr, flush=True)


def _task_output(app_id: str) -> int:
    """Every task's own output, `[worker:0]` before each line, in task order, attempt by attempt."""
    import tempfile
    from pathlib import Path

    from tony_airflow.core.task_logs import OUTPUT_FILES_PATTERN, labelled, spool
    from tony_airflow.yarn import logs

    with tempfile.TemporaryDirectory(prefix="tony-logs-") as spool_dir:
        outputs = spool(logs.log_lines(app_id, None, OUTPUT_FILES_PATTERN, timeout=600), Path(spool_dir))
        if not outputs:
            print(f"error: no task output of {app_id} yet (no task's command has started, or YARN has not "
                  f"aggregated its logs); `tony logs {app_id} --raw` prints every file YARN has", file=sys.stderr)
            return 1
        for line in labelled(outputs):
            print(line)
    sys.stdout.flush()
    return 0


def add_parsers(sub: Any) -> None:
    def history_dir_option(p: argparse.ArgumentParser, default: Any) -> None:
        p.add_argument("--history-dir", default=default,
                       help="the history root (default: $TONY_HISTORY_DIR or /tmp/tony-history on HDFS)")

    history = sub.add_parser("history", help="finished and running jobs, from the AM's event logs")
    history_dir_option(history, None)
    history.set_defaults(func=_list)
    actions = history.add_subparsers(dest="action")
    listing = actions.add_parser("list", help="every job: id, name, user, status, start, duration, attempts")
    listing.set_defaults(func=_list)
    show = actions.add_parser("show", help="one job: the task table of each attempt and the events")
    show.add_argument("application_id")
    show.add_argument("--no-events", action="store_true", help="only the task tables")
    show.set_defaults(func=_show)
    serve = actions.add_parser("serve", help="the history web UI")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any)")
    serve.add_argument("--max-age", default=DEFAULT_MAX_AGE,
                       help=f"purge finished histories older than this (default {DEFAULT_MAX_AGE}; 0: never)")
    serve.add_argument("--purge-interval", default="1h", help="how often to purge (default 1h)")
    serve.set_defaults(func=_serve)
    purge = actions.add_parser("purge", help="delete finished histories older than --max-age")
    purge.add_argument("--max-age", default=DEFAULT_MAX_AGE, help=f"e.g. 30d, 12h (default {DEFAULT_MAX_AGE})")
    purge.set_defaults(func=_purge)

    for action in (listing, show, serve, purge):
        history_dir_option(action, argparse.SUPPRESS)

    logs = sub.add_parser("logs", help="the tasks' own output, labelled [worker:0], in task order and attempt by "
                                       "attempt; one task's container logs (--task); YARN's whole dump (--raw)")
    logs.add_argument("application_id")
    logs.add_argument("-f", "--follow", action="store_true",
                      help="follow a running job as ytf-submit does (the same as `tony follow`)")
    logs.add_argument("--raw", action="store_true",
                      help="every log file of every container, as `yarn logs` prints them")
    logs.add_argument("--task", help="TYPE:INDEX, e.g. worker:0: that task's container(s), one per attempt")
    logs.add_argument("--attempt", type=int, help="with --task: only this attempt")
    logs.add_argument("--all-files", action="store_true",
                      help="with --task: every log file of the container, not only the task's output")
    logs.add_argument("--history-dir", help="where to find which container ran the task")
    logs.set_defaults(func=_logs)
