"""Benchmark: N concurrent training tasks watched by deferrable operators (one triggerer) vs. poke-mode sensors.

What is measured is the cost of waiting on YARN from Airflow, for N = 1, 10, 50, 200:
- deferrable, shared poll: N `YarnApplicationTrigger`s running in one process's event loop, as
  Airflow's triggerer runs them, sharing one ResourceManager poll per interval (Airflow's shared
  streams, triggers/rm_rounds.py);
  the deferred tasks hold no worker slot;
- deferrable, per task: the same triggers, each with a poll of its own (`run()`, as a triggerer
  without shared streams runs them), for comparison;
- poke: N `YarnApplicationSensor`s in poke mode, one process each, as N worker slots run them
  (up to N = 50: 200 Airflow processes do not fit this machine's purpose).
Both poll every POLL_S seconds. Reported: resident memory of the waiting processes (summed),
worker slots held, and ResourceManager requests per minute, counted by a pass-through proxy in
front of the real ResourceManager of the local cluster.
The applications waited on are real: K small skein applications (the local cluster cannot hold
50 training jobs at once on 2 cores), each watched by N/K waiters; a waiter's cost does not
depend on which RUNNING application it polls.

    .venv/bin/python -m bench.airflow_deferrable [--sizes 1 10 50] [--window 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from aiohttp import ClientSession, web

from bench.local import local_cluster
from bench.report import Report
from bench.scratch import scratch_dir

POLL_S = 5.0
SIZES = [1, 10, 50, 200]
APPS = 4
MAX_POKE = 50  # poke mode is one Airflow process per task


class CountingProxy:
    """Forwards every request to the ResourceManager and counts them."""

    def __init__(self, rm_url: str):
        self.rm_url = rm_url.rstrip("/")
        self.count = 0
        self.port = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> CountingProxy:
        threading.Thread(target=self._serve, daemon=True).start()
        self._ready.wait(30)
        return self

    def _serve(self) -> None:
        async def main() -> None:
            session = ClientSession()

            async def forward(request: web.Request) -> web.Response:
                self.count += 1
                async with session.request(request.method, self.rm_url + request.path_qs,
                                           data=await request.read(), headers={"Accept": "application/json",
                                           "Content-Type": request.headers.get("Content-Type", "application/json")}) as r:
                    return web.Response(body=await r.read(), status=r.status, content_type="application/json")

            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", forward)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self._ready.set()
            await asyncio.Event().wait()

        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(main())


# ---------------------------------------------------------------- waiter processes
def _peak_rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def triggerer(proxy: str, app_ids: list[str], n: int, window: float, shared: bool = True) -> None:
    """One process, N triggers in one event loop (what Airflow's triggerer does with them)."""
    from airflow.triggers.shared_stream import SharedStreamManager

    from tony_airflow.providers.yarn.triggers.yarn import YarnApplicationTrigger

    async def main() -> None:
        triggers = [YarnApplicationTrigger(app_ids[i % len(app_ids)], [proxy], poll_interval=POLL_S)
                    for i in range(n)]
        manager = SharedStreamManager()  # what Airflow's triggerer runs triggers with a shared stream key through

        async def drain(i: int, t: YarnApplicationTrigger) -> None:
            events = (t.filter_shared_stream(manager.subscribe(trigger_id=i, trigger=t, key=t.shared_stream_key()))
                      if shared else t.run())  # per task: a poll of its own, one request set per trigger per round
            async for _ in events:
                return

        tasks = [asyncio.create_task(drain(i, t)) for i, t in enumerate(triggers)]
        print("ready", flush=True)
        await asyncio.sleep(window)
        for task in tasks:
            task.cancel()

    asyncio.run(main())
    print(f"peak_rss_kib {_peak_rss_kib()}", flush=True)


def poker(app_id: str, window: float) -> None:
    """One process: a poke-mode sensor, poking every POLL_S seconds (one worker slot)."""
    from tony_airflow.providers.yarn.sensors.yarn import YarnApplicationSensor

    sensor = YarnApplicationSensor(task_id="wait", application_id=app_id, yarn_conn_id="yarn_bench",
                                   poke_interval=POLL_S, mode="poke")
    print("ready", flush=True)
    end = time.monotonic() + window
    while time.monotonic() < end:
        assert sensor.poke({}) is False
        time.sleep(POLL_S)
    print(f"peak_rss_kib {_peak_rss_kib()}", flush=True)


# ---------------------------------------------------------------- the benchmark
@dataclass
class Row:
    n: int
    mode: str
    rss_mib: float
    slots: int
    requests_per_min: float
    processes: int


def _line(proc: subprocess.Popen, prefix: str) -> str:
    """The next line of a waiter's stdout that starts with `prefix` (Airflow logs to stdout too)."""
    for line in proc.stdout:
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    raise RuntimeError(f"waiter exited with {proc.wait()} before printing {prefix!r}")


def _run_waiters(cmds: list[list[str]], env: dict[str, str], proxy: CountingProxy, window: float) -> tuple[float, int]:
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, text=True, env=env) for c in cmds]
    try:
        for p in procs:
            _line(p, "ready")
        start_count, start = proxy.count, time.monotonic()
        peaks = [int(_line(p, "peak_rss_kib ")) for p in procs]
        elapsed = time.monotonic() - start
        count = proxy.count - start_count
    finally:
        for p in procs:
            p.wait(timeout=60)
    return count / elapsed * 60.0, sum(peaks)


def run(sizes: list[int], window: float) -> Report:
    import skein

    from tony_airflow.core.client import TonyClient
    from tony_airflow.core.protocol import APP_TAG

    local_cluster()
    client = TonyClient()
    proxy = CountingProxy(client.rm.addresses[0]).start()
    proxy_url = f"http://127.0.0.1:{proxy.port}"
    env = {**os.environ, "AIRFLOW_HOME": scratch_dir("bench-airflow-"),
           "AIRFLOW_CONN_YARN_BENCH": json.dumps({"conn_type": "yarn", "host": "127.0.0.1", "port": proxy.port})}
    rows: list[Row] = []

    def waited_on() -> skein.ApplicationSpec:
        # the project's tag, as every job the operator submits carries: the shared poll's rounds ask for the
        # project's applications (an untagged one is another tool's, asked for by its own trigger)
        return skein.ApplicationSpec(name="bench-waited-on", tags={APP_TAG}, master=skein.Master(
            resources=skein.Resources(memory=256, vcores=1), script="sleep 3600"))

    app_ids = [client.submit_spec(waited_on()) for _ in range(APPS)]
    try:
        for app_id in app_ids:
            while client.rm.application(app_id).state != "RUNNING":
                time.sleep(0.5)
        me = [sys.executable, "-m", "bench.airflow_deferrable"]
        for n in sizes:
            for mode, flag in (("deferrable, shared poll", "--triggerer"), ("deferrable, per task", "--per-task")):
                rate, peak = _run_waiters([me + [flag, proxy_url, str(n), str(window), *app_ids]],
                                          env, proxy, window)
                rows.append(Row(n, mode, peak / 1024, 0, rate, 1))
                print(f"N={n} {mode}: {rate:.0f} req/min, {peak / 1024:.0f} MiB", file=sys.stderr)
            if n > MAX_POKE:
                continue
            cmds = [me + ["--poke", app_ids[i % APPS], str(window)] for i in range(n)]
            rate, peak = _run_waiters(cmds, env, proxy, window)
            rows.append(Row(n, "poke", peak / 1024, n, rate, n))
            print(f"N={n} poke: {rate:.0f} req/min, {peak / 1024:.0f} MiB", file=sys.stderr)
    finally:
        for app_id in app_ids:
            client.rm.kill(app_id)
    return Report(
        name="airflow_deferrable",
        title="Airflow: deferrable operators in one triggerer vs. poke-mode sensors",
        command=".venv/bin/python -m bench.airflow_deferrable",
        columns=["N tasks", "mode", "processes", "RSS MiB (sum)", "worker slots", "RM requests/min"],
        rows=[[r.n, r.mode, r.processes, f"{r.rss_mib:.0f}", r.slots, f"{r.requests_per_min:.0f}"] for r in rows],
        notes=[f"poll interval {POLL_S:.0f} s in both modes; {window:.0f} s window per row; "
               f"{APPS} real RUNNING applications watched round-robin",
               "RSS is each waiting process's peak (ru_maxrss), summed; a real worker also runs a supervisor "
               "per task, so poke mode costs at least this much"],
        aims=["RM requests per minute with the shared poll do not grow with N"],
        verdicts=[_verdict(rows)],
        data={"rows": [r.__dict__ for r in rows]},
        plot=_plot,
    )


def _verdict(rows: list[Row]) -> str:
    shared = sorted((r.n, r.requests_per_min) for r in rows if r.mode == "deferrable, shared poll")
    if len(shared) < 2:
        return "one size only: no trend to judge"
    (n0, low), (n1, high) = shared[0], shared[-1]
    flat = high <= low * 1.5 + 1  # a round more or less in the window is noise, a factor of N is not
    return (f"shared poll: {low:.0f} req/min at N={n0}, {high:.0f} at N={n1}: "
            + ("aim met" if flat else "aim missed"))


def _plot(report: Report, ax_pair) -> None:
    rows = report.data["rows"]
    for mode, style in (("deferrable, shared poll", "o-"), ("deferrable, per task", "^:"), ("poke", "s--")):
        pts = [r for r in rows if r["mode"] == mode]
        ax_pair[0].plot([r["n"] for r in pts], [r["rss_mib"] for r in pts], style, label=mode)
        ax_pair[1].plot([r["n"] for r in pts], [r["requests_per_min"] for r in pts], style, label=mode)
    ax_pair[0].set(xlabel="concurrent training tasks", ylabel="resident memory (MiB)", title="memory")
    ax_pair[1].set(xlabel="concurrent training tasks", ylabel="ResourceManager requests per minute",
                   title="RM load")
    for ax in ax_pair:
        ax.legend()
        ax.grid(alpha=0.3)


def main(argv: list[str]) -> None:
    if argv[:1] in (["--triggerer"], ["--per-task"]):
        triggerer(argv[1], argv[4:], int(argv[2]), float(argv[3]), shared=argv[0] == "--triggerer")
        return
    if argv[:1] == ["--poke"]:
        poker(argv[1], float(argv[2]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    parser.add_argument("--window", type=float, default=30.0)
    args = parser.parse_args(argv)
    print(run(args.sizes, args.window).table())


if __name__ == "__main__":
    main(sys.argv[1:])
