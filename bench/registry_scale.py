"""Benchmark: N simulated executors register with the real AM registry over loopback.

The AM side is the production code (Registry + the aiohttp server with HMAC
checks) in its own process; the executors are N concurrent asyncio clients
that sign and register, waiting for the cluster spec in the registration's
answer (then long-polling for it), as real executors do.
Prints, per N, the time until every executor holds the cluster spec and the
AM process's resident memory. Aim: 5000 executors in under 3 s, growing linearly.

    .venv/bin/python -m bench.registry_scale [N ...] [--steady-seconds S]
"""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import os
import resource
import subprocess
import sys
import time
import zlib

import aiohttp
import psutil

from bench.report import Report
from tony_airflow.core import protocol
from tony_airflow.local.cluster.processes import rss_kib

DEFAULT_SIZES = (100, 500, 1000, 2000, 5000)
AIM_EXECUTORS, AIM_S = 5000, 3.0  # every executor holds the spec within AIM_S seconds (issue #30 item 11)
STEADY_AT, STEADY_S, AIM_RSS_MIB = 1000, 150.0, 256  # issue #30 item 12: the AM shares a 512 MiB container;
# 150 s: a task shipping 1 KiB a second would fill its 128 Ki characters of held output
LINEAR_EXPONENT = 1.3  # time ~ n^k from 1000 executors up: above this, it grows faster than linearly
SECRET = "bench-" + "0" * 58


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def serve(n: int) -> None:
    """The AM side: print the port, serve until stdin closes."""
    from tony_airflow.core.am import server
    from tony_airflow.core.am.registry import Registry
    from tony_airflow.core.spec import build_job_spec

    _raise_fd_limit()

    async def main() -> None:
        job = build_job_spec({"cluster_requirement": f"worker:{n}", "command": "true"})
        registry = Registry(job, "application_bench_0001")
        registry.new_attempt(1)
        runner, port = await server.start(server.build_app(registry, SECRET), host="127.0.0.1")
        print(port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await runner.cleanup()

    asyncio.run(main())


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, method: str, path: str,
                    body: bytes = b"") -> tuple[int, bytes, bytes]:
    """One signed HTTP/1.1 request on a kept-alive connection, as the executor's http.client makes it:
    (status, the start of the decoded answer, the answer's bytes as sent). Plain asyncio streams, not
    aiohttp's client: aiohttp's client cost this machine 5.4 s of CPU for 5000 executors, more than the
    AM it measures (2.0 s), on the same 2 cores."""
    headers = {**protocol.sign(SECRET, method, path, body), "Content-Length": str(len(body)),
               "Accept-Encoding": "gzip"}
    if body:
        headers["Content-Type"] = "application/json"
    head = f"{method} {path} HTTP/1.1\r\nHost: am\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    writer.write(head.encode() + b"\r\n" + body)
    answer = await reader.readuntil(b"\r\n\r\n")
    fields = dict(line.lower().split(b": ", 1) for line in answer.split(b"\r\n")[1:] if b": " in line)
    data = await reader.readexactly(int(fields.get(b"content-length", b"0")))
    return int(answer.split(b" ", 2)[1]), _start_of(data, fields.get(b"content-encoding") == b"gzip"), data


def _start_of(data: bytes, gzipped: bool, size: int = 100) -> bytes:
    """The first `size` bytes of each gzip member (the AM sends an answer's head and its spec apart),
    decoded without decoding the rest."""
    start = b""
    while gzipped and data:
        member = zlib.decompressobj(wbits=31)
        start += member.decompress(data, size)
        data = member.unused_data if member.eof else b""
    return start if gzipped else data[:size]


async def _executor(port: int, index: int, specs: list[bytes]) -> None:
    """What an executor sends: its registration, which waits for the gang (the answer then holds the
    cluster spec), then cluster-spec long polls until the spec is there."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        body = json.dumps({"type": "worker", "index": index, "attempt": 1, "host": "127.0.0.1",
                           "port": 20000 + index}).encode()
        status, start, data = await _exchange(reader, writer, "POST", f"{protocol.REGISTER}?wait=5", body)
        while READY not in start:
            assert status == 200, start
            status, start, data = await _exchange(
                reader, writer, "GET", f"{protocol.CLUSTER_SPEC}?attempt=1&type=worker&index={index}&wait=20")
        specs.append(data)
    finally:
        writer.close()


READY = b'"state": "ready"'


async def _run_executors(port: int, n: int) -> float:
    """Seconds until all n hold the spec. Each real executor decodes its spec in its own process; here
    one process would decode n specs of n hosts each (2.5 s of this machine's CPU at 5000), so one is
    decoded and checked, and every other executor's answer is checked to carry the same spec."""
    specs: list[bytes] = []
    start = time.perf_counter()
    await asyncio.gather(*(_executor(port, i, specs) for i in range(n)))
    seconds = time.perf_counter() - start
    assert len(specs) == n, f"{len(specs)} of {n} executors hold the spec"
    spec = json.loads(gzip.decompress(specs[0]))["spec"]
    assert spec["hosts"]["worker"] == [f"127.0.0.1:{20000 + i}" for i in range(n)], "a wrong cluster spec"
    tails = {_tail(s) for s in specs}
    assert len(tails) == 1, f"executors were sent {len(tails)} different specs"
    return seconds


def _tail(answer: bytes) -> bytes:
    """The spec's member of a gzipped answer (after the answer's own head)."""
    member = zlib.decompressobj(wbits=31)
    member.decompress(answer, 1)
    while not member.eof:
        member.decompress(member.unconsumed_tail, 4096)
    return member.unused_data


async def _steady_executor(session: aiohttp.ClientSession, base: str, index: int, until: float,
                           sent: list[int]) -> None:
    """A running task: a heartbeat and a 1 KiB piece of output every second (what the AM holds grows)."""
    offset = 0
    line = f"worker {index}: step done, loss 0.1234\n"
    piece = (line * (1024 // len(line) + 1))[:1024]
    while time.monotonic() < until:
        began = time.monotonic()
        for path, message in ((protocol.HEARTBEAT, {"type": "worker", "index": index, "attempt": 1}),
                              (protocol.OUTPUT, {"type": "worker", "index": index, "attempt": 1,
                                                 "offset": offset, "text": piece})):
            body = json.dumps(message).encode()
            headers = {**protocol.sign(SECRET, "POST", path, body), "Content-Type": "application/json"}
            async with session.post(base + path, data=body, headers=headers) as resp:
                assert resp.status == 200, await resp.text()
            sent[0] += 1
        offset += len(piece)
        await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - began)))


async def _run_steady(port: int, n: int, seconds: float) -> float:
    """Requests per second the AM answered while N tasks ran for `seconds`."""
    base = f"http://127.0.0.1:{port}"
    sent = [0]
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=120)) as session:
        start = time.monotonic()
        await asyncio.gather(*(_steady_executor(session, base, i, start + seconds, sent) for i in range(n)))
        return sent[0] / (time.monotonic() - start)


def _cpu_s(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def measure(n: int, steady_s: float = 0.0) -> tuple[float, float, int, int | None, float]:
    """(seconds until all hold the spec, the AM's CPU seconds for it, AM RSS then, AM RSS after `steady_s` of
    running tasks, their request rate)."""
    am = subprocess.Popen([sys.executable, "-m", "bench.registry_scale", "--serve", str(n)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    steady_rss, rate = None, 0.0
    try:
        port = int(am.stdout.readline())
        started_cpu = _cpu_s(am.pid)
        seconds = asyncio.run(_run_executors(port, n))
        am_cpu = _cpu_s(am.pid) - started_cpu
        rss = rss_kib(am.pid)
        if steady_s > 0:
            rate = asyncio.run(_run_steady(port, n, steady_s))
            steady_rss = rss_kib(am.pid)
    finally:
        am.stdin.close()
        am.wait(timeout=30)
    return seconds, am_cpu, rss, steady_rss, rate


def run(sizes: list[int] | None = None, steady_s: float = STEADY_S) -> Report:
    _raise_fd_limit()
    rows, data = [], []
    steady: list[tuple[int, float, float]] = []
    cpu: list[tuple[int, float]] = []
    for n in sizes or DEFAULT_SIZES:
        seconds, am_cpu, rss, steady_rss, rate = measure(n, steady_s if n == STEADY_AT else 0.0)
        cpu.append((n, am_cpu))
        rows.append([n, f"{seconds:.3f}", f"{seconds / n * 1000:.3f}", f"{am_cpu:.2f}", f"{rss / 1024:.1f}",
                     f"{steady_rss / 1024:.1f} ({rate:.0f} req/s)" if steady_rss is not None else "-"])
        data.append((n, seconds, rss / 1024))
        if steady_rss is not None:
            steady.append((n, steady_rss / 1024, rate))
        print(f"{n} executors: {seconds:.3f} s", file=sys.stderr)
    return Report(
        name="registry_scale", title="Registry: simulated executors registering with the real AM server",
        command=".venv/bin/python -m bench.registry_scale",
        columns=["executors", "all hold spec (s)", "per 1000 (s)", "AM CPU (s)", "AM RSS (MiB)",
                 f"AM RSS after {steady_s:.0f} s running (MiB)"], rows=rows,
        notes=[f"{os.cpu_count()} cores, python {sys.version.split()[0]}",
               "each simulated executor sends what a real one does: its registration, which waits for the gang "
               "(`?wait=5`: the answer holds the cluster spec once the last one registered), on one kept-alive "
               "connection, accepting gzip; the simulator is plain asyncio streams and checks one spec whole, "
               "the others byte for byte (it shares the cores with the AM)",
               f"running: each task sends a heartbeat and 1 KiB of output every second, at {STEADY_AT} tasks"],
        aims=[f"{AIM_EXECUTORS} executors in under {AIM_S:.0f} s",
              f"AM resident memory under {AIM_RSS_MIB} MiB with {STEADY_AT} running tasks"],
        verdicts=[f"{n} executors in {s:.2f} s: aim {'met' if s < AIM_S else 'missed'}"
                  for n, s, _ in data if n == AIM_EXECUTORS]
        + growth_verdicts([(n, s) for n, s, _ in data], "time")
        + growth_verdicts(cpu, "the AM's CPU time")
        + [f"{n} running tasks: AM at {mib:.0f} MiB: {'PASS' if mib < AIM_RSS_MIB else 'FAIL'}"
           for n, mib, _ in steady],
        data={"points": data}, plot=_plot)


def growth_verdicts(points: list[tuple[int, float]], what: str = "time") -> list[str]:
    """How `what` (seconds) grows with N from 1000 executors up: the exponent k of it ~ N^k (least squares
    on logs), and PASS only if k <= LINEAR_EXPONENT. The seconds per 1000 executors say the same in figures.
    Wall time also holds the simulated executors, which share this machine's cores with the AM; the AM's
    own CPU time is what its algorithms cost."""
    big = [(n, s) for n, s in points if n >= 1000 and s > 0]
    if len(big) < 2:
        return [f"growth of {what}: not measured (needs two sizes of 1000 executors or more)"]
    xs, ys = [math.log(n) for n, _ in big], [math.log(s) for _, s in big]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    k = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    per_1000 = ", ".join(f"{n}: {s / n * 1000:.3f} s" for n, s in big)
    verdict = "PASS (linear)" if k <= LINEAR_EXPONENT else "FAIL (faster than linear)"
    return [f"growth of {what}: ~ N^{k:.2f} from 1000 executors up (per 1000: {per_1000}): {verdict}"]


def _plot(report: Report, axes: list) -> None:
    n, seconds, rss = zip(*report.data["points"])
    axes[0].plot(n, seconds, "o-")
    axes[0].axhline(AIM_S, color="#c5221f", ls=":", label=f"aim at {AIM_EXECUTORS}: {AIM_S:.0f} s")
    axes[0].set(xlabel="executors", ylabel="seconds until all hold the spec", title="registration")
    axes[0].legend()
    axes[1].plot(n, rss, "o-")
    axes[1].set(xlabel="executors", ylabel="AM resident memory (MiB)", title="AM memory")
    for ax in axes:
        ax.grid(alpha=0.3)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--serve"]:
        serve(int(argv[1]))
        return
    steady_s = STEADY_S
    if "--steady-seconds" in argv:
        at = argv.index("--steady-seconds")
        steady_s = float(argv[at + 1])
        argv = argv[:at] + argv[at + 2:]
    print(run([int(a) for a in argv] or None, steady_s).table())


if __name__ == "__main__":
    main(sys.argv[1:])
