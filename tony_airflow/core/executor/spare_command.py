"""A spare's command started before the spare has a place (issue 54: a lost worker replaced within 10 s).

An elastic job's spare (core/executor/spare.py) used to start its command only once told whose place it takes:
after the kill, Python and torch were imported again in the spare's torchrun agent before it could even join
the group's new round. Now, when the worker's command is torchrun under the AM's rendezvous, the spare's
executor starts it at once; the agent imports torch and blocks in its first rendezvous
(core/executor/torchrun_rendezvous.py) until this module hands it the place: the whole environment the
executor built for that worker (TASK_INDEX, CLUSTER_SPEC, DTF_*, the output's local path, ...), written to
one file (whole, then renamed) after the output was staged. torch's LocalElasticAgent starts its worker
processes with `os.environ` as it is at that moment (torch/distributed/elastic/multiprocessing's
SubprocessHandler copies it), and the handler puts the place's environment there before it joins: the
workers see exactly what a worker's command started after its place would have seen.

Until the place, the command's output is held (at most HELD_BYTES) and then goes to the task's output like any
task's; a spare never placed stops its command (SIGTERM to its group, SIGKILL after a grace) and writes what it
held to its own log.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from tony_airflow.core import protocol
from tony_airflow.core.executor.child import UserProcess

log = logging.getLogger("tony.executor")
HELD_BYTES = 256 * 1024  # the early command's output before the place: torchrun's few lines, a bound all the same
PLACE_FILE = "tony-spare-place.json"


# torchrun's own rendezvous options: an agent given one would never wait for its place (the AM's is `tony`)
OWN_RENDEZVOUS = ("--standalone", "--rdzv-backend", "--rdzv_backend", "--rdzv-endpoint", "--rdzv_endpoint")


def _own_rendezvous_option(word: str) -> bool:
    """One of OWN_RENDEZVOUS, also shortened: torchrun's argparse takes any unambiguous prefix (`--standal`)."""
    name = word.split("=", 1)[0]
    return name.startswith("--") and len(name) > 2 and any(o.startswith(name) for o in OWN_RENDEZVOUS)


def is_torchrun(command: str) -> bool:
    """Whether the command is torchrun itself (`torchrun ...`, `python -m torch.distributed.run ...`) and
    nothing else: only then is what runs before the place torch's agent, which waits in the rendezvous and
    starts its workers with the place's environment. Not started early: anything the shell would do with the
    early environment — a step before or after torchrun (`&&`, `;`, `|`, a redirection, a newline, a
    subshell), a `$VARIABLE` or a command substitution in its arguments (bash expands them when it starts,
    so the workers would get worker 0's values) — and a torchrun given a rendezvous of its own."""
    if "$" in command or "`" in command or "\n" in command:
        return False
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:
        return False
    if not words or any(w and all(c in "();<>|&" for c in w) for w in words):
        return False
    if any(_own_rendezvous_option(w) for w in words):
        return False
    if os.path.basename(words[0]) == "torchrun":
        return True
    return (os.path.basename(words[0]).startswith("python") and len(words) > 2 and words[1] == "-m"
            and words[2] == "torch.distributed.run")


class EarlyCommand:
    """The spare's command, started before its place; handed the place's environment once it has one."""

    def __init__(self, command: str, env: dict[str, str], cwd: str | None, place_file: Path) -> None:
        self.place_file = place_file.absolute()
        self._lock = threading.Lock()
        self._held: list[tuple[str, bytes]] = []
        self._held_bytes = 0
        self._forward: Callable[[str, bytes], None] | None = None
        self._sink = open(os.devnull, "wb")  # the task's output file takes it once placed (output_tee.py)
        self.process = UserProcess(command, {**env, protocol.SPARE_PLACE_ENV: str(self.place_file)}, cwd=cwd,
                                   on_output=self._output, stdout_sink=self._sink, stderr_sink=self._sink)
        log.info("started before a place (torch's agent waits in the rendezvous): %s", command)

    def _output(self, stream: str, chunk: bytes) -> None:
        with self._lock:
            forward = self._forward
            if forward is None:
                self._held.append((stream, chunk))
                self._held_bytes += len(chunk)
                while self._held_bytes > HELD_BYTES and len(self._held) > 1:
                    self._held_bytes -= len(self._held.pop(0)[1])
                return
        forward(stream, chunk)

    def alive(self) -> bool:
        return self.process.alive()

    def hand_over(self, env: dict[str, str], on_output: Callable[[str, bytes], None]) -> UserProcess:
        """The place's environment to the waiting agent, and the command's output to the task's from now on
        (what it said before first). The file is the executor's alone (0600: the environment holds tokens)."""
        with self._lock:
            for stream, chunk in self._held:
                on_output(stream, chunk)
            self._held, self._held_bytes = [], 0
            self._forward = on_output
        part = self.place_file.with_name(self.place_file.name + ".part")
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(env, fh)
        os.replace(part, self.place_file)
        return self.process

    def end(self, grace: float) -> None:
        """A spare not placed (or an executor that could not run its command): nothing of it is left running."""
        if self.process.alive():
            self.process.stop(grace)
        self.process.wait()
        self.process.kill_group()
        with self._lock:
            held, self._held = self._held, []
            placed = self._forward is not None
        if not placed:
            for stream, chunk in held:  # the spare's own log: what its torchrun said while it waited
                (sys.stdout if stream == "stdout" else sys.stderr).buffer.write(chunk)
        self._sink.close()
