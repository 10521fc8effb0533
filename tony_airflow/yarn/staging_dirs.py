"""The staging directories of applications (`~/.skein/<application id>`): who removes them, and when.

Each holds what a container needs to start — the job spec, its secret, the source zip, a
venv archive — and must not outlive its application. skein's AM removes it when the
application ends by itself; an application killed through YARN (`tony kill`, an Airflow
task's kill, `yarn application -kill`, the RM UI) ends with its AM's container, so:
- whoever kills an application through this project removes it once YARN says it ended
  (`remove_when_ended`);
- every submission sweeps the user's staging directories of applications that ended
  (`sweep`): what a kill by other means, or a client that died, left behind.
A directory the ResourceManager does not know (an application of an earlier RM, or a
submission still under way) goes only once it is older than an hour.
"""

from __future__ import annotations

import logging
import posixpath
import time
from typing import TYPE_CHECKING

from tony_airflow.yarn.rest import ResourceManagerClient, ResourceManagerError, is_application_id

if TYPE_CHECKING:
    from fsspec.implementations.webhdfs import WebHDFS

log = logging.getLogger("tony.staging_dirs")
STAGING_ROOT = ".skein"  # skein's AM reads its files from here (yarn/submission.py)
UNKNOWN_AFTER_S = 3600.0  # a submission takes seconds; an application of an earlier RM is older
SWEEP_LIMIT = 50          # RM lookups per sweep: a submission is never held up for long
ENDED_WAIT_S = 30.0


def staging_dir(home: str, app_id: str) -> str:
    return posixpath.join(home, STAGING_ROOT, app_id)


def remove(fs: WebHDFS, home: str, app_id: str) -> bool:
    """Remove `app_id`'s staging directory; False if there was none."""
    try:
        return bool(fs._call("DELETE", "delete", staging_dir(home, app_id), recursive="true").json().get("boolean"))
    except FileNotFoundError:
        return False


def remove_when_ended(rm: ResourceManagerClient, fs: WebHDFS, home: str, app_id: str,
                      wait_s: float = ENDED_WAIT_S, poll_s: float = 0.5) -> bool:
    """Once YARN says `app_id` ended (after a kill: its containers may still be starting from these
    files until then), remove its staging directory. False if it had not ended within `wait_s`
    (the next submission's sweep takes it)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if rm.application(app_id).is_terminal:
                return remove(fs, home, app_id)
        except ResourceManagerError as exc:
            if not exc.transient:
                return remove(fs, home, app_id)  # unknown to the RM: nothing can start from it any more
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)


def sweep(rm: ResourceManagerClient, fs: WebHDFS, home: str, keep: frozenset[str] = frozenset(),
          now: float | None = None, limit: int = SWEEP_LIMIT) -> list[str]:
    """Remove the staging directories of `home` whose applications ended; the ids removed. Never raises:
    a sweep is housekeeping beside a submission."""
    now = time.time() if now is None else now
    try:
        entries = fs.ls(posixpath.join(home, STAGING_ROOT), detail=True)
    except FileNotFoundError:
        return []
    except Exception as exc:
        log.warning("staging sweep skipped: %s", exc)
        return []
    removed: list[str] = []
    candidates = sorted((e for e in entries if e.get("type") == "directory"),
                        key=lambda e: int(e.get("modificationTime") or 0))
    for entry in candidates[:limit]:
        app_id = posixpath.basename(str(entry.get("name", "")).rstrip("/"))
        if not is_application_id(app_id) or app_id in keep:
            continue
        try:
            try:
                ended = rm.application(app_id).is_terminal
            except ResourceManagerError as exc:
                if exc.transient:
                    continue
                ended = now - int(entry.get("modificationTime") or 0) / 1000 > UNKNOWN_AFTER_S
            if ended and remove(fs, home, app_id):
                removed.append(app_id)
        except Exception as exc:
            log.warning("staging sweep: %s: %s", app_id, exc)
    return removed
