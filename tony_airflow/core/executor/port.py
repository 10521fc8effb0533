"""Reserving a task's port and holding it until the user process has bound it.

The socket is bound with SO_REUSEADDR and SO_REUSEPORT and never listens.
Linux lets a second socket bind the same address while no socket on it
listens and both set SO_REUSEADDR (gRPC's servers do, so TensorFlow's does; on
TF 2.21 SO_REUSEPORT alone was refused with "Could not start gRPC server").
So the user's server binds while the executor still holds the port: there is
no close-then-rebind window in which another process could take it. The
kernel never hands a bound port to a bind(0), so the port stays ours.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

_LISTEN = "0A"


class PortReservation:
    def __init__(self, host: str = "0.0.0.0"):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        self.sock.bind((host, 0))
        self.port: int = self.sock.getsockname()[1]
        self._closed = False

    def release(self) -> None:
        if not self._closed:
            self._closed = True
            self.sock.close()

    def release_when_bound(self, alive, poll: float = 0.2) -> threading.Thread:
        """Close the reservation once another socket listens on the port (or the child is gone)."""
        def watch() -> None:
            while not self._closed and alive():
                if is_listening(self.port):
                    break
                time.sleep(poll)
            self.release()

        thread = threading.Thread(target=watch, name="port-reservation", daemon=True)
        thread.start()
        return thread


def is_listening(port: int) -> bool:
    """Whether some socket on this host is in LISTEN state on `port` (from /proc/net/tcp*)."""
    hex_port = f"{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 3 and cols[1].rsplit(":", 1)[1] == hex_port and cols[3] == _LISTEN:
                return True
    return False
