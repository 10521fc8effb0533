"""Submitting without skein's Java driver (issue #20, item 2): what reaches HDFS and the RM.

The staged directory must be what skein's ApplicationMaster reads (`.skein.proto` naming every
file with the size and modification time YARN's localizer checks), the submission what the
RM's REST API takes. The real AM running from it is proven end to end (every e2e test submits
this way); here the shape, the cache and the failure paths, against fakes.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import skein
from skein.proto import ApplicationSpec as SpecProto

from tony_airflow.yarn import submission
from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.tokens import HadoopToken

HOME = "/user/alice"


class FakeWebHDFS:
    """The WebHDFS operations the submission uses, over a dict; counts what it was asked."""

    def __init__(self) -> None:
        self.files: dict[str, dict[str, Any]] = {}  # path -> {"data", "mtime", "permission"}
        self.dirs: dict[str, str] = {}
        self.ops: list[tuple[str, str]] = []
        self.clock = 1_000
        self.session = SimpleNamespace(put=self._put)
        self._pending: dict[str, tuple[str, str | None]] = {}

    def home_directory(self) -> str:
        return HOME

    def _apply_proxy(self, url: str) -> str:
        return url

    def _call(self, op: str, method: str = "get", path: str | None = None, redirect: bool = True, **params: Any):
        self.ops.append((op, path or ""))
        if op == "MKDIRS":
            self.dirs[path] = params.get("permission", "755")
            return None
        if op == "CREATE":
            location = f"http://datanode/{len(self._pending)}"
            self._pending[location] = (path, params.get("permission"))
            return SimpleNamespace(headers={"Location": location})
        if op == "SETTIMES":
            self.files[path]["mtime"] = int(params["modificationtime"])
            return None
        if op == "RENAME":
            target = params["destination"]
            if target in self.files and params.get("renameoptions") != "OVERWRITE":
                return SimpleNamespace(json=lambda: {"boolean": False})
            self.files[target] = self.files.pop(path)
            return SimpleNamespace(json=lambda: {"boolean": True})
        raise AssertionError(op)

    def _put(self, location: str, data: Any, headers: dict[str, str]):
        path, permission = self._pending.pop(location)
        self.clock += 1
        raw = data if isinstance(data, bytes) else data.read()
        self.files[path] = {"data": raw, "mtime": self.clock, "permission": permission}
        return SimpleNamespace(raise_for_status=lambda: None)

    def info(self, path: str) -> dict[str, Any]:
        if path not in self.files:
            raise FileNotFoundError(path)
        f = self.files[path]
        return {"name": path, "length": len(f["data"]), "modificationTime": f["mtime"], "type": "file"}

    def ls(self, path: str, detail: bool = True) -> list[dict[str, Any]]:
        found = [self.info(p) for p in self.files if p.rsplit("/", 1)[0] == path]
        if not found and path not in self.dirs:
            raise FileNotFoundError(path)
        return found

    def rm(self, path: str, recursive: bool = False) -> None:
        self.ops.append(("DELETE", path))
        for p in [p for p in self.files if p == path or p.startswith(path + "/")]:
            del self.files[p]


class FakeRM:
    def __init__(self, refuse: bool = False) -> None:
        self.user, self.refuse, self.bodies = "alice", refuse, []
        self.ids = iter(f"application_1_{n:04d}" for n in range(1, 100))

    def new_application(self) -> str:
        return next(self.ids)

    def submit_application(self, body: dict[str, Any]) -> None:
        if self.refuse:
            from tony_airflow.yarn.rest import ResourceManagerError
            raise ResourceManagerError("POST /ws/v1/cluster/apps: HTTP 400: queue 'nope' does not exist")
        self.bodies.append(body)


def _conf(**props: str) -> HadoopConf:
    return HadoopConf(conf_dir=None, props={"fs.defaultFS": "hdfs://nn:8020", **props})  # type: ignore[arg-type]


def _spec(tmp_path) -> skein.ApplicationSpec:
    job = tmp_path / "job.json"
    job.write_text('{"name": "x"}')
    files = {".tony-job.json": skein.File(str(job), type="file")}

    def service() -> skein.Service:
        return skein.Service(script="exec python3 -m tony_airflow.core.executor", files=dict(files),
                             resources=skein.Resources(memory=256, vcores=1), env={"A": "1"})

    return skein.ApplicationSpec(
        name="digits", queue="default", tags={"tony-airflow"}, max_attempts=1,
        master=skein.Master(script="exec python3 -m tony_airflow.core.am", files=dict(files), env={"B": "2"}),
        services={"worker": service(), "ps": service()})


@pytest.fixture(autouse=True)
def _credentials(monkeypatch):
    monkeypatch.setattr(submission, "user_credentials", lambda: (b"CERT", b"KEY"))


def test_the_staged_spec_is_what_skeins_am_reads(tmp_path):
    fs, rm = FakeWebHDFS(), FakeRM()
    done = submission.submit(_spec(tmp_path), rm, fs, _conf(), lang="C.UTF-8")
    app_dir = f"{HOME}/.skein/{done.app_id}"
    assert done.app_dir == f"hdfs://nn:8020{app_dir}" and fs.dirs[app_dir] == "700"
    spec = skein.ApplicationSpec.from_protobuf(SpecProto.FromString(fs.files[f"{app_dir}/.skein.proto"]["data"]))
    for name, service in spec.services.items():
        assert service.script == f"bash .skein.sh ><LOG_DIR>/{name}.log 2>&1"
        assert {".skein.sh", ".skein.crt", ".skein.pem", ".tony-job.json"} <= set(service.files)
        assert service.env["LANG"] == "C.UTF-8"
        sh = service.files[".skein.sh"]
        assert fs.files[sh.source.split("nn:8020", 1)[1]]["data"] == b"exec python3 -m tony_airflow.core.executor"
    assert set(spec.master.files) >= {".skein.jar", ".skein.crt", ".skein.pem", ".tony-job.json"}
    assert spec.master.security.cert_file.source == spec.services["worker"].files[".skein.crt"].source
    # every file the spec names is on HDFS with the size and modification time it says
    for file in [*spec.master.files.values(), *(f for s in spec.services.values() for f in s.files.values())]:
        path = file.source.split("hdfs://nn:8020", 1)[1]
        assert (file.size, file.timestamp) == (len(fs.files[path]["data"]), fs.files[path]["mtime"]), path
        assert fs.files[path]["permission"] in ("600", None)
    job = spec.master.files[".tony-job.json"]
    assert job.source.startswith(f"hdfs://nn:8020{app_dir}/") and str(job.visibility).lower() == "application"
    assert str(spec.master.files[".skein.jar"].visibility).lower() == "private"


def test_the_submission_is_the_rest_apis_context(tmp_path):
    fs, rm = FakeWebHDFS(), FakeRM()
    done = submission.submit(_spec(tmp_path), rm, fs, _conf(**{"yarn.application.classpath": "$HADOOP_CONF_DIR, /jars/*"}))
    body = rm.bodies[0]
    assert body["application-id"] == done.app_id and body["application-type"] == "skein"
    assert body["application-tags"] == {"tag": ["tony-airflow"]} and body["queue"] == "default"
    assert body["resource"] == {"memory": 512, "vCores": 1} and body["max-app-attempts"] == 1
    container = body["am-container-spec"]
    env = {e["key"]: e["value"] for e in container["environment"]["entry"]}
    assert env["CLASSPATH"] == "{{CLASSPATH}}<CPS>./*<CPS>$HADOOP_CONF_DIR<CPS>/jars/*"
    assert env["SKEIN_APPLICATION_ID"] == done.app_id and env["HADOOP_USER_NAME"] == "alice" and env["B"] == "2"
    resources = {e["key"]: e["value"] for e in container["local-resources"]["entry"]}
    assert set(resources) >= {".skein.proto", ".skein.jar", ".skein.crt", ".skein.pem", ".tony-job.json"}
    assert resources[".skein.jar"]["visibility"] == "PRIVATE" and resources[".skein.proto"]["type"] == "FILE"
    assert container["commands"]["command"].endswith(
        f"com.anaconda.skein.ApplicationMaster hdfs://nn:8020{HOME}/.skein/{done.app_id} "
        "><LOG_DIR>/application.master.log 2>&1")
    assert "credentials" not in container


def test_on_a_kerberos_cluster_the_tokens_go_with_the_application_and_no_user_name(tmp_path):
    fs, rm = FakeWebHDFS(), FakeRM()
    token = HadoopToken("127.0.0.1:8020", b"id", b"pw", "HDFS_DELEGATION_TOKEN", "127.0.0.1:8020")
    submission.submit(_spec(tmp_path), rm, fs, _conf(**{"hadoop.security.authentication": "kerberos"}),
                      tokens=[token])
    container = rm.bodies[0]["am-container-spec"]
    assert container["credentials"]["tokens"] == {"entry": [{"key": "127.0.0.1:8020", "value": token.url_string()}]}
    assert "HADOOP_USER_NAME" not in {e["key"] for e in container["environment"]["entry"]}


def test_what_does_not_change_is_uploaded_once(tmp_path):
    fs, rm = FakeWebHDFS(), FakeRM()
    submission.submit(_spec(tmp_path), rm, fs, _conf())
    first = [p for op, p in fs.ops if op == "CREATE"]
    submission.submit(_spec(tmp_path), rm, fs, _conf())
    second = [p for op, p in fs.ops if op == "CREATE"][len(first):]
    assert any(p.startswith(f"{HOME}/.tony-airflow/cache/skein-") for p in first)
    assert not any(".tony-airflow/cache" in p for p in second), second
    # per application: the job file (shared by master and services, once) and the spec
    assert sorted(p.rsplit("/", 1)[1] for p in second) == [".skein.proto", "job.json"]


def test_a_cache_file_published_first_by_another_client_is_the_one_used(tmp_path):
    fs, rm = FakeWebHDFS(), FakeRM()
    cache = f"{HOME}/.tony-airflow/cache"
    fs.dirs[cache] = "700"
    original_put = fs._put

    def racing_put(location, data, headers):  # another client renames the same file into place meanwhile
        response = original_put(location, data, headers)
        for path in list(fs.files):
            if path.startswith(cache) and ".tony-part" in path:
                final = path.split(".tony-part")[0]
                if final not in fs.files:
                    fs.files[final] = {**fs.files[path], "mtime": 7}
        return response

    fs._put = racing_put  # type: ignore[method-assign]
    fs.session = SimpleNamespace(put=racing_put)
    submission.submit(_spec(tmp_path), rm, fs, _conf())
    spec = skein.ApplicationSpec.from_protobuf(SpecProto.FromString(
        fs.files[f"{HOME}/.skein/application_1_0001/.skein.proto"]["data"]))
    assert spec.master.files[".skein.jar"].timestamp == 7  # theirs, not a copy of ours named with another time
    assert not [p for p in fs.files if ".tony-part" in p]


def test_a_refused_submission_leaves_no_staging_directory(tmp_path):
    from tony_airflow.yarn.rest import ResourceManagerError

    fs, rm = FakeWebHDFS(), FakeRM(refuse=True)
    with pytest.raises(ResourceManagerError, match="queue 'nope'"):
        submission.submit(_spec(tmp_path), rm, fs, _conf())
    assert ("DELETE", f"{HOME}/.skein/application_1_0001") in fs.ops
    assert not [p for p in fs.files if "/.skein/" in p]


class TimedOutRM(FakeRM):
    """The submission reached the RM, but its answer did not come back (a timeout, a failover)."""

    def __init__(self, accepted: bool) -> None:
        super().__init__()
        self.accepted, self.asked = accepted, 0

    def submit_application(self, body: dict[str, Any]) -> None:
        from tony_airflow.yarn.rest import ResourceManagerError

        if self.accepted:
            self.bodies.append(body)
        raise ResourceManagerError("no ResourceManager answered: timed out", transient=True)

    def application(self, app_id: str):
        from tony_airflow.yarn.rest import ApplicationReport, ResourceManagerError

        self.asked += 1
        if self.bodies:
            return ApplicationReport(app_id, "ACCEPTED", "UNDEFINED")
        raise ResourceManagerError(f"GET /ws/v1/cluster/apps/{app_id}: HTTP 404: not found")


def test_a_submission_whose_answer_was_lost_is_looked_up_before_anything_is_removed(tmp_path):
    """Issue #30 item 3: after a transport error the staging directory was deleted and 'YARN refused'
    raised, although the RM had accepted the application (which then failed for lack of its files)."""
    fs, rm = FakeWebHDFS(), TimedOutRM(accepted=True)
    done = submission.submit(_spec(tmp_path), rm, fs, _conf())
    assert done.app_id == "application_1_0001" and rm.asked >= 1
    assert not [op for op in fs.ops if op[0] == "DELETE" and "/.skein/" in op[1]]


def test_a_submission_the_rm_never_got_is_cleaned_up_and_reported(tmp_path):
    from tony_airflow.yarn.rest import ResourceManagerError

    fs, rm = FakeWebHDFS(), TimedOutRM(accepted=False)
    with pytest.raises(ResourceManagerError, match="timed out"):
        submission.submit(_spec(tmp_path), rm, fs, _conf())
    assert ("DELETE", f"{HOME}/.skein/application_1_0001") in fs.ops


def test_the_application_has_the_jobs_am_attempts_and_their_validity_interval(tmp_path):
    """Issue #29 item 2: one YARN attempt lost the whole job with its AM's host."""
    spec = _spec(tmp_path)
    fs, rm = FakeWebHDFS(), FakeRM()
    submission.submit(spec, rm, fs, _conf(), am_attempts=2, attempt_validity_ms=3_600_000)
    body = rm.bodies[-1]
    assert body["max-app-attempts"] == 2 and body["attempt-failures-validity-interval"] == 3_600_000
    # skein's own spec stays at one attempt: its AM would not unregister a FAILED job while it allowed more
    assert spec.max_attempts == 1
    assert body["keep-containers-across-application-attempts"] is False  # YARN ends the lost AM's containers


def test_the_am_node_label_is_the_am_containers_label_expression_in_the_rest_api(tmp_path):
    """#41 item 3: Hadoop's ApplicationSubmissionContextInfo names it `am-container-node-label-expression`
    (the key sent before, `am-label-expression`, is not one: the RM ignored it)."""
    spec = _spec(tmp_path)
    spec.node_label = "cpu"
    fs, rm = FakeWebHDFS(), FakeRM()
    submission.submit(spec, rm, fs, _conf())
    body = rm.bodies[-1]
    assert body["am-container-node-label-expression"] == "cpu" and "am-label-expression" not in body


def test_skeins_am_is_ended_by_a_signal_without_running_its_exit_cleanup(tmp_path):
    """Issue 51 item 1 (a fresh-clone run): the NodeManager going away SIGTERMs every process of the AM's
    container, skein's JVM too. Its shutdown hook takes attempt 1 for the last one (the spec's max_attempts is 1,
    so that skein unregisters a FAILED job) and, when it wins the 250 ms before SIGKILL, unregisters FAILED and
    deletes the staging directory: AM attempts 2 and 3 failed to localize .tony-secret and the job FAILED.
    With -Xrs a signal ends the JVM without its hooks; its own end (our AM's word) still runs them. The
    staging directory of a killed job is removed by `tony kill` or the next submission's sweep."""
    fs, rm = FakeWebHDFS(), FakeRM()
    submission.submit(_spec(tmp_path), rm, fs, _conf())
    command = rm.bodies[0]["am-container-spec"]["commands"]["command"]
    assert " -Xrs " in command and command.index("-Xrs") < command.index("com.anaconda.skein.ApplicationMaster")
