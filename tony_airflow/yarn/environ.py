"""Setting process environment variables for a moment, one caller at a time.

Some libraries read their settings only from os.environ: skein starts its driver JVM
(and `yarn classpath`) from it, and MIT Kerberos under gssapi reads KRB5_CONFIG on
every call. A cluster is a client's own setting, so it is set only while they run,
and restored afterwards, so that a later client in the same process is not pointed at it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

_LOCK = threading.RLock()  # re-entrant: a scoped call may make another (the local cluster's health checks)


@contextlib.contextmanager
def scoped_environ(env: dict[str, str]) -> Iterator[None]:
    with _LOCK:
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
