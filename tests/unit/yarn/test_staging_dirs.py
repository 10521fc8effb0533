"""Which staging directories a sweep removes, and when a kill removes one (issue #30 item 4)."""

from __future__ import annotations

import time

from tony_airflow.yarn import staging_dirs
from tony_airflow.yarn.rest import ApplicationReport, ResourceManagerError

HOME = "/user/alice"
NOW = 1_800_000_000.0


class FakeRM:
    def __init__(self, states: dict[str, str], transient: frozenset[str] = frozenset()):
        self.states, self.transient, self.asked = states, transient, []

    def application(self, app_id: str) -> ApplicationReport:
        self.asked.append(app_id)
        if app_id in self.transient:
            raise ResourceManagerError("no RM answered", transient=True)
        if app_id not in self.states:
            raise ResourceManagerError(f"404: {app_id} not found")
        state = self.states[app_id]
        final = {"FINISHED": "SUCCEEDED", "KILLED": "KILLED", "FAILED": "FAILED"}.get(state, "UNDEFINED")
        return ApplicationReport(id=app_id, state=state, final_status=final, tracking_url="", diagnostics="")


class Response:
    def __init__(self, found: bool):
        self.found = found

    def json(self) -> dict:
        return {"boolean": self.found}


class FakeFS:
    def __init__(self, dirs: dict[str, float]):
        self.dirs = dict(dirs)  # app id -> modification time (s)
        self.deleted: list[str] = []

    def ls(self, path: str, detail: bool = True) -> list[dict]:
        assert path == f"{HOME}/.skein"
        return [{"name": f"{path}/{a}", "type": "directory", "modificationTime": int(t * 1000)}
                for a, t in self.dirs.items()] + [{"name": f"{path}/notes.txt", "type": "file"}]

    def _call(self, op: str, method: str, path: str, **params) -> Response:
        assert (op, method, params) == ("DELETE", "delete", {"recursive": "true"})
        app_id = path.rsplit("/", 1)[1]
        self.deleted.append(app_id)
        return Response(self.dirs.pop(app_id, None) is not None)


def _app(n: int) -> str:
    return f"application_1700000000000_{n:04d}"


def test_a_sweep_removes_ended_applications_and_old_unknown_ones_and_keeps_the_rest():
    rm = FakeRM({_app(1): "FINISHED", _app(2): "KILLED", _app(3): "RUNNING", _app(4): "ACCEPTED",
                 _app(7): "FAILED"}, transient=frozenset({_app(5)}))
    fs = FakeFS({_app(1): NOW - 10, _app(2): NOW - 10, _app(3): NOW - 10, _app(4): NOW - 10,
                 _app(5): NOW - 7200,  # the RM did not answer: kept
                 _app(6): NOW - 7200,  # unknown to the RM, old: an application of an earlier RM
                 _app(8): NOW - 5,     # unknown to the RM, young: a submission under way
                 _app(7): NOW - 10})   # the one being submitted (kept whatever the RM says)
    removed = staging_dirs.sweep(rm, fs, HOME, keep=frozenset({_app(7)}), now=NOW)
    assert sorted(removed) == [_app(1), _app(2), _app(6)]
    assert sorted(fs.dirs) == [_app(3), _app(4), _app(5), _app(7), _app(8)]
    assert _app(7) not in rm.asked


def test_a_sweep_asks_the_rm_a_bounded_number_of_times_oldest_first():
    fs = FakeFS({_app(n): NOW - 100 + n for n in range(1, 200)})
    rm = FakeRM({_app(n): "FINISHED" for n in range(1, 200)})
    removed = staging_dirs.sweep(rm, fs, HOME, now=NOW, limit=20)
    assert removed == [_app(n) for n in range(1, 21)] and len(rm.asked) == 20


def test_a_sweep_never_raises():
    class Broken(FakeFS):
        def ls(self, path, detail=True):
            raise ConnectionError("NameNode away")

    assert staging_dirs.sweep(FakeRM({}), Broken({}), HOME, now=NOW) == []
    assert staging_dirs.sweep(FakeRM({}), FakeFS({}), HOME, now=NOW) == []


def test_a_killed_application_loses_its_staging_directory_once_yarn_says_it_ended():
    rm = FakeRM({_app(1): "RUNNING"})
    fs = FakeFS({_app(1): time.time()})
    assert staging_dirs.remove_when_ended(rm, fs, HOME, _app(1), wait_s=0, poll_s=0) is False
    assert fs.dirs  # still running: its containers may still start from these files
    rm.states[_app(1)] = "KILLED"
    assert staging_dirs.remove_when_ended(rm, fs, HOME, _app(1), wait_s=0, poll_s=0) is True
    assert not fs.dirs
