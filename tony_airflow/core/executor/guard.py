"""The first process of the user command's process group: the group dies with its executor.

The executor runs the command in a process group of its own, so that it can stop
the command (SIGTERM, then SIGKILL after the grace) without stopping itself. YARN's
kill of a container reaches the container's process group only, and its SIGKILL
comes 250 ms after its SIGTERM (the OOM killer's at once): the executor can die
before it has killed the command's group. The kernel's parent-death signal
reaches the executor's child alone, so a command behind a wrapper (a shell
script, `python3 train.py; echo done`) whose process ignores SIGTERM — as
TensorFlow's MultiWorkerMirroredStrategy workers do — would run on with no
container around it.

So the executor's child, the first process of that group, is this guard: it
starts the command in the same group, holds the read end of a pipe (the lease)
whose only write end the executor holds, and kills the whole group when the
lease reads EOF: whatever ended the executor.
It survives the executor's SIGTERM to the group (the command gets that signal
directly) and exits as the command did, so the executor sees the command's code.

A container engine's client (`docker run --rm -i`) leaves nothing once its container ran: the
container's own watchdog reads the client's end as its lease (core/executor/engine.py). A container
created but not yet started when its client dies is out of that lease's reach and would stay
'Created' for good; so with `--remove ENGINE NAME` the guard removes the container by name whenever
the client did not end by itself (killed by a signal, or the lease ended), in a session of its own
so that the group's SIGKILL does not stop the removal.
Standard library only: it runs as `python -I -S guard.py <lease fd> <argv...>`.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

# Python ignores these at start; the command gets them back at their defaults, as subprocess does.
RESTORED = tuple(getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name))
NOT_FOUND = 127


def parse(argv: list[str]) -> tuple[int, tuple[str, str] | None, list[str]]:
    """`guard.py LEASE_FD [--remove ENGINE NAME] COMMAND...`: the option only before the command."""
    lease, rest = int(argv[1]), argv[2:]
    if rest[:1] == ["--remove"]:
        return lease, (rest[1], rest[2]), rest[3:]
    return lease, None, rest


def _remove(container: tuple[str, str] | None) -> None:
    """`ENGINE rm -f NAME`, not waited for, in its own session (it outlives the group's SIGKILL)."""
    if container is None:
        return
    engine, name = container
    quiet = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
             (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
             (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)]
    try:
        os.posix_spawnp(engine, [engine, "rm", "-f", name], os.environ, file_actions=quiet, setsid=True)
    except OSError:
        pass


def _kill_the_group_when_the_lease_ends(lease: int, container: tuple[str, str] | None) -> None:
    """The lease reads EOF once every write end is closed: the executor is gone, however it ended."""
    while True:
        try:
            if not os.read(lease, 512):
                break
        except OSError:
            break
    _remove(container)
    os.killpg(0, signal.SIGKILL)


def main(argv: list[str]) -> int:
    lease, container, command = parse(argv)
    os.set_inheritable(lease, False)  # the command does not hold it
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # a handler, not SIG_IGN: the command
        signal.signal(sig, lambda *_: None)                      # gets the default back at exec
    try:
        pid = os.posix_spawnp(command[0], command, os.environ, setsigdef=RESTORED)
    except OSError as exc:
        print(f"tony: cannot start {command[0]}: {exc.strerror}", file=sys.stderr)
        return NOT_FOUND
    threading.Thread(target=_kill_the_group_when_the_lease_ends, args=(lease, container), daemon=True).start()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # the client was killed: its container may never have started (or be running still)
        _remove(container)
    return code if code >= 0 else 128 - code  # killed by signal N: 128+N, like a shell


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stderr.flush()
    os._exit(code)  # not sys.exit: the lease's thread stays blocked in read
