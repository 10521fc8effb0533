"""The Airflow provider against a fake ResourceManager: hook, operator, sensor, trigger, links, registration."""

from __future__ import annotations

import asyncio
import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.airflow_context import DictStore, task_context
from tests.unit.fake_rm import FakeApp, FakeResourceManager

airflow = pytest.importorskip("airflow")

from airflow.sdk import PokeReturnValue  # noqa: E402
from airflow.sdk.exceptions import AirflowException, AirflowFailException, TaskDeferred  # noqa: E402

from tony_airflow.core.client import JobHandle  # noqa: E402
from tony_airflow.errors import UsageError  # noqa: E402
from tony_airflow.providers.yarn.connection import EXTRA_KEYS, YarnSettings  # noqa: E402
from tony_airflow.providers.yarn.get_provider_info import get_provider_info  # noqa: E402
from tony_airflow.providers.yarn.hooks.yarn import YarnHook  # noqa: E402
from tony_airflow.providers.yarn.links.yarn import TensorBoardLink, YarnApplicationLink  # noqa: E402
from tony_airflow.providers.yarn.operators.tensorflow import TensorFlowOnYarnOperator  # noqa: E402
from tony_airflow.providers.yarn.sensors.yarn import YarnApplicationSensor  # noqa: E402
from tony_airflow.providers.yarn.triggers.yarn import MAX_CONSECUTIVE_ERRORS, YarnApplicationTrigger  # noqa: E402
from tony_airflow.yarn.rest import ResourceManagerClient, ResourceManagerError  # noqa: E402

APP = "application_1699999999999_0042"
RUNNING = [("ACCEPTED", "UNDEFINED"), ("RUNNING", "UNDEFINED"), ("RUNNING", "UNDEFINED")]


@pytest.fixture
def fake_rm(monkeypatch):
    rm = FakeResourceManager().start()
    monkeypatch.setenv("AIRFLOW_CONN_FAKE_YARN", json.dumps(
        {"conn_type": "yarn", "host": rm.url.split("//")[1], "login": "alice", "extra": {"queue": "ml"}}))
    yield rm
    rm.stop()


class FakeTonyClient:
    """Submits by adding an application to the fake RM; the handle polls the fake RM for real."""

    def __init__(self, rm: FakeResourceManager, states: list[tuple[str, str]], diagnostics: str = "") -> None:
        self.rm, self.states, self.diagnostics = rm, states, diagnostics
        self.submitted: list[Any] = []
        self.staging_removed: list[str] = []

    def submit(self, job):
        job_id = f"application_1700000000000_{len(self.submitted) + 1:04d}"
        self.rm.apps[job_id] = FakeApp(list(self.states), diagnostics=self.diagnostics, tags=",".join(job.tags))
        self.submitted.append(job)
        return self.handle(job_id)

    def handle(self, app_id: str) -> JobHandle:
        return JobHandle(app_id, ResourceManagerClient(self.rm.url, user="alice"))

    def kill(self, app_id: str) -> None:  # the core's kill, without HDFS: its staging removal is tested apart
        ResourceManagerClient(self.rm.url, user="alice").kill(app_id)

    def remove_staging(self, app_id: str, wait_s: float = 0) -> bool:
        self.staging_removed.append(app_id)
        return True

    def close(self) -> None:
        pass


def _operator(fake_rm, monkeypatch, states=None, diagnostics="", **kwargs) -> tuple[TensorFlowOnYarnOperator, FakeTonyClient]:
    client = FakeTonyClient(fake_rm, states or RUNNING + [("FINISHED", "SUCCEEDED")], diagnostics)
    monkeypatch.setattr(YarnHook, "tony_client", lambda self: client)
    args = {"task_id": "train", "cluster_requirement": "worker:2", "command": "python3 train.py",
            "yarn_conn_id": "fake_yarn", "poll_interval": 0.01, "stream_logs": False, **kwargs}
    return TensorFlowOnYarnOperator(**args), client


# ------------------------------------------------------------ registration
def test_provider_info_matches_airflows_schema_and_names_importable_classes():
    import jsonschema

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    for dotted in info["extra-links"] + [c["hook-class-name"] for c in info["connection-types"]]:
        module, _, name = dotted.rpartition(".")
        assert getattr(importlib.import_module(module), name)
    for kind in ("hooks", "operators", "sensors", "triggers"):
        for entry in info[kind]:
            for module in entry["python-modules"]:
                importlib.import_module(module)


def test_providers_manager_finds_the_provider_and_its_connection_type():
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    pm = ProvidersManager()
    assert "tony-airflow" in pm.providers
    assert "tony_airflow.providers.yarn.links.yarn.TensorBoardLink" in pm.extra_links_class_names
    hook = ProvidersManagerTaskRuntime().hooks["yarn"]
    assert hook.hook_class_name == "tony_airflow.providers.yarn.hooks.yarn.YarnHook"


def test_the_connection_form_has_a_field_per_setting_and_no_json_box():
    from airflow.providers_manager import ProvidersManager

    pm = ProvidersManager()
    widgets = {name: w for name, w in pm.connection_form_widgets.items() if name.startswith("extra__yarn__")}
    assert sorted(widgets) == sorted(f"extra__yarn__{k}" for k in EXTRA_KEYS)
    assert widgets["extra__yarn__auth"].field["schema"]["enum"][:2] == ["simple", "kerberos"]
    assert widgets["extra__yarn__keytab"].field["schema"]["title"] == "Kerberos keytab"
    behaviour = pm.field_behaviours["yarn"]
    assert {"password", "extra"} <= set(behaviour["hidden_fields"])
    assert behaviour["relabeling"]["host"].startswith("ResourceManager web address(es)")


def test_what_the_form_saves_reads_like_a_hand_written_extra():
    from airflow.sdk import Connection

    saved = {"extra__yarn__queue": "ml", "extra__yarn__auth": "kerberos", "extra__yarn__principal": "etl@R",
             "extra__yarn__keytab": "/k", "extra__yarn__hadoop_conf_dir": "", "rm_addresses": None}
    s = YarnSettings.from_connection(Connection(conn_id="c", conn_type="yarn", host="rm", extra=json.dumps(saved)))
    assert (s.queue, s.auth, s.principal, s.keytab, s.hadoop_conf_dir) == ("ml", "kerberos", "etl@R", "/k", None)
    assert s.rm_addresses == ["http://rm"]


# -------------------------------------------------------------------- hook
def test_hook_reads_an_ha_connection_with_port_and_https():
    from airflow.sdk import Connection

    conn = Connection(conn_id="c", conn_type="yarn", host="rm1,rm2", port=8090, schema="https", login="bob",
                      extra=json.dumps({"hadoop_conf_dir": "/etc/hadoop/conf", "queue": "ml"}))
    s = YarnSettings.from_connection(conn)
    assert s.rm_addresses == ["https://rm1:8090", "https://rm2:8090"]
    assert (s.hadoop_conf_dir, s.queue, s.user, s.auth) == ("/etc/hadoop/conf", "ml", "bob", "simple")


@pytest.mark.parametrize("extra, field", [
    ({"queu": "x"}, "unknown extra 'queu'"),
    ({"auth": "digest"}, "auth 'digest'; allowed: simple, kerberos"),
    ({"auth": "kerberos"}, "needs extras 'principal' and 'keytab'"),
])
def test_hook_refuses_a_bad_connection_in_one_line(extra, field):
    from airflow.sdk import Connection

    with pytest.raises(UsageError, match=field) as err:
        YarnSettings.from_connection(Connection(conn_id="c", conn_type="yarn", host="rm", extra=json.dumps(extra)))
    assert "\n" not in str(err.value)


def test_hook_without_yarn_default_uses_hadoop_conf_dir(tmp_path, monkeypatch):
    from tony_airflow.yarn.hadoop_conf import write_site

    write_site(tmp_path / "yarn-site.xml", {"yarn.resourcemanager.webapp.address": "rm.example:8088"})
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    monkeypatch.delenv("AIRFLOW_CONN_YARN_DEFAULT", raising=False)
    assert YarnHook().settings.rm_addresses == ["http://rm.example:8088"]


def test_hook_report_and_kill(fake_rm, monkeypatch):
    fake_rm.apps[APP] = FakeApp(list(RUNNING))
    monkeypatch.setattr(YarnHook, "tony_client", lambda self: FakeTonyClient(fake_rm, []))
    hook = YarnHook("fake_yarn")
    assert hook.application_report(APP).state == "ACCEPTED"
    assert hook.application_report(APP).state == "RUNNING"
    hook.kill_application(APP)
    assert fake_rm.apps[APP].killed_by == "alice"
    assert hook.application_report(APP).final_status == "KILLED"
    assert hook.get_conn() is hook.get_conn()  # one RM client (one HTTP client) for a poking sensor's pokes


# ----------------------------------------------------------------- trigger
def _events(trigger: YarnApplicationTrigger) -> list[dict]:
    async def collect():
        return [event.payload async for event in trigger.run()]
    return asyncio.run(collect())


def test_trigger_serialize_round_trips():
    trigger = YarnApplicationTrigger(APP, ["http://rm1:8088", "http://rm2:8088"], user="alice", poll_interval=2.5)
    classpath, kwargs = trigger.serialize()
    module, _, name = classpath.rpartition(".")
    again = getattr(importlib.import_module(module), name)(**kwargs)
    assert again.serialize() == (classpath, kwargs)
    assert json.loads(json.dumps(kwargs)) == kwargs  # what the triggerer stores must be plain JSON


@pytest.mark.parametrize("final, status", [("SUCCEEDED", "success"), ("FAILED", "failed")])
def test_trigger_yields_one_event_when_the_application_ends(fake_rm, final, status):
    fake_rm.apps[APP] = FakeApp(RUNNING + [("FINISHED", final)], diagnostics="worker:1 exit 1: loss is NaN",
                                tags="tony-airflow")
    events = _events(YarnApplicationTrigger(APP, [fake_rm.url], poll_interval=0.01))
    assert [e["status"] for e in events] == [status]
    assert events[0]["final_status"] == final
    # two requests per round (this project's active applications, and those that ended lately), three rounds
    rm_gets = [p for m, p in fake_rm.requests if m == "GET" and not p.startswith("/proxy/")]
    assert len(rm_gets) == 6
    # and the AM's progress page in the round it ran
    assert [p for _, p in fake_rm.requests if p.startswith("/proxy/")] == [f"/proxy/{APP}/pages/tony/progress.json"]


def test_trigger_turns_rm_errors_into_an_error_event(fake_rm):
    fake_rm.fail_with = 500
    events = _events(YarnApplicationTrigger(APP, [fake_rm.url], poll_interval=0.01))
    assert len(events) == 1 and events[0]["status"] == "error" and "fake RM failure" in events[0]["message"]
    assert fake_rm.count("GET") == 3  # MAX_CONSECUTIVE_ERRORS


def test_trigger_rides_out_a_resourcemanager_failover(fake_rm):
    """No RM active for more rounds than the error budget (an election after the active one died): the
    trigger keeps watching and reports the end, as Hadoop's clients wait for a new active RM."""
    fake_rm.apps[APP] = FakeApp([("RUNNING", "UNDEFINED")] * 3 + [("FINISHED", "SUCCEEDED")], tags="tony-airflow")
    fake_rm.standby_requests = 4 * MAX_CONSECUTIVE_ERRORS
    events = _events(YarnApplicationTrigger(APP, [fake_rm.url], poll_interval=0.01))
    assert [e["status"] for e in events] == ["success"], events
    assert fake_rm.standby_requests == 0


def test_trigger_gives_up_when_no_resourcemanager_is_active_for_its_patience(fake_rm):
    fake_rm.apps[APP] = FakeApp([("RUNNING", "UNDEFINED")], tags="tony-airflow")
    fake_rm.standby_requests = 10**6
    events = _events(YarnApplicationTrigger(APP, [fake_rm.url], poll_interval=0.01, rm_patience_s=0.5))
    assert len(events) == 1 and events[0]["status"] == "error", events
    assert "no active ResourceManager answered" in events[0]["message"]
    assert fake_rm.count("GET") > 2 * MAX_CONSECUTIVE_ERRORS  # ridden out past the budget of answered errors


def test_trigger_on_kill_kills_a_running_application(fake_rm):
    fake_rm.apps[APP] = FakeApp([("RUNNING", "UNDEFINED")])
    asyncio.run(YarnApplicationTrigger(APP, [fake_rm.url], user="alice").on_kill())
    assert fake_rm.apps[APP].killed_by == "alice"


# ---------------------------------------------------------------- operator
def test_operator_pushes_xcoms_at_submit_and_final_status_at_the_end(fake_rm, monkeypatch):
    op, client = _operator(fake_rm, monkeypatch, tensorboard=True, output_path="hdfs:///out")
    ctx = task_context()
    assert op.execute(ctx) == "application_1700000000000_0001"
    xcoms = ctx["ti"].xcoms
    url = f"{fake_rm.url}/proxy/application_1700000000000_0001/"
    assert xcoms["application_id"] == "application_1700000000000_0001"
    assert xcoms["tracking_url"] == url and xcoms["tensorboard_url"] == url + "pages/tensorboard/"
    assert xcoms[YarnApplicationLink().xcom_key] == url and xcoms[TensorBoardLink().xcom_key].endswith("/tensorboard/")
    assert ctx["ti"].pushes[-1] == "final_status" and xcoms["final_status"] == "SUCCEEDED"
    job = client.submitted[0]
    assert job.queue == "ml" and job.tasks["worker"].instances == 2 and "tensorboard" in job.tasks
    assert "airflow_dag_id:dag" in job.tags and "airflow_task_id:train" in job.tags
    assert ctx["task_state_store"].get(op.external_id_key) == "application_1700000000000_0001"


def test_operator_submits_a_pytorch_job_with_torchrun_processes_and_an_elastic_range(fake_rm, monkeypatch):
    """Issue #42: framework, nproc_per_node and elastic are the operator's own arguments."""
    op, client = _operator(fake_rm, monkeypatch, cluster_requirement="master:1,worker:2", framework="pytorch",
                           nproc_per_node="worker:2", elastic="1:2", spares=1, command="torchrun train.py")
    op.execute(task_context())
    job = client.submitted[0]
    assert (job.framework, job.tasks["worker"].nproc_per_node, job.elastic_min, job.elastic_max, job.spares) == \
        ("pytorch", 2, 1, 2, 1)


def test_operator_logs_on_state_changes_only(fake_rm, monkeypatch, caplog):
    states = [("ACCEPTED", "UNDEFINED")] * 5 + [("RUNNING", "UNDEFINED")] * 20 + [("FINISHED", "SUCCEEDED")]
    op, _ = _operator(fake_rm, monkeypatch, states=states)
    lines: list[str] = []
    monkeypatch.setattr(op, "_log_change", lambda report, progress: lines.append(report.state))
    op.execute(task_context())
    assert lines == ["ACCEPTED", "RUNNING", "FINISHED"]


def test_operator_failure_carries_the_yarn_diagnostics(fake_rm, monkeypatch):
    op, _ = _operator(fake_rm, monkeypatch, states=RUNNING + [("FINISHED", "FAILED")],
                      diagnostics="worker:1 exited with code 1 on host h: ValueError: loss is NaN")
    ctx = task_context()
    with pytest.raises(AirflowException, match="FAILED: worker:1 exited with code 1 .*loss is NaN"):
        op.execute(ctx)
    assert ctx["ti"].xcoms["final_status"] == "FAILED"


@pytest.mark.parametrize("kwargs, line", [
    ({"cluster_requirement": "worker:two"}, "cluster_requirement"),
    ({"task_memory": "lots"}, "task_memory"),
    ({"env": {"1BAD": "x"}}, "env"),
    ({"conf": {"timeouts": {"forever": 1}}}, "timeouts"),
    ({"conf": {"client": True}}, "client"),
    ({"log_tail_lines": -1}, "log_tail_lines"),
    ({"log_tail_lines": "many"}, "log_tail_lines"),
])
def test_operator_bad_input_fails_without_retry_and_submits_nothing(fake_rm, monkeypatch, kwargs, line):
    op, client = _operator(fake_rm, monkeypatch, **kwargs)
    with pytest.raises(AirflowFailException) as err:
        op.execute(task_context())
    assert str(err.value).startswith(line) and "\n" not in str(err.value)
    assert client.submitted == [] and fake_rm.requests == []


def test_operator_without_waiting_returns_once_submitted(fake_rm, monkeypatch):
    op, _ = _operator(fake_rm, monkeypatch, wait_for_completion=False)
    ctx = task_context()
    assert op.execute(ctx) == "application_1700000000000_0001"
    assert "final_status" not in ctx["ti"].xcoms


def test_operator_deferrable_defers_to_the_trigger_and_completes_from_its_event(fake_rm, monkeypatch):
    op, _ = _operator(fake_rm, monkeypatch, deferrable=True, poll_interval=7)
    ctx = task_context()
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(ctx)
    trigger = deferred.value.trigger
    assert isinstance(trigger, YarnApplicationTrigger) and deferred.value.method_name == "execute_complete"
    assert trigger.application_id == "application_1700000000000_0001" and trigger.poll_interval == 7
    assert trigger.rm_addresses == [fake_rm.url] and trigger.user == "alice"
    ok = {"status": "success", "application_id": trigger.application_id, "final_status": "SUCCEEDED"}
    assert op.execute_complete(ctx, ok) == trigger.application_id
    with pytest.raises(AirflowException, match="KILLED: killed by alice"):
        op.execute_complete(ctx, {**ok, "status": "killed", "final_status": "KILLED", "diagnostics": "killed by alice"})
    with pytest.raises(AirflowException, match="cannot watch"):
        op.execute_complete(ctx, {"status": "error", "application_id": "x", "message": "cannot watch x"})


@pytest.mark.parametrize("deferrable", [False, True])
def test_the_operator_leaves_no_staging_directory_once_its_application_ended(fake_rm, monkeypatch, deferrable):
    """skein's AM removes it only after unregistering: the task may see the end first (runner's twin)."""
    op, client = _operator(fake_rm, monkeypatch, deferrable=deferrable)
    ctx = task_context()
    if deferrable:
        with pytest.raises(TaskDeferred) as deferred:
            op.execute(ctx)
        app = deferred.value.trigger.application_id
        op.execute_complete(ctx, {"status": "success", "application_id": app, "final_status": "SUCCEEDED"})
    else:
        app = op.execute(ctx)
    assert client.staging_removed == [app]


def test_a_staging_directory_that_cannot_be_removed_does_not_fail_the_task(fake_rm, monkeypatch):
    op, client = _operator(fake_rm, monkeypatch)

    def refuse(app_id: str, wait_s: float = 0) -> bool:
        raise AirflowFailException("hadoop_conf_dir: no Hadoop configuration found")

    monkeypatch.setattr(client, "remove_staging", refuse)
    assert op.execute(task_context()).startswith("application_")


def test_a_deferring_operator_logs_the_state_it_leaves_and_the_trigger_goes_on_from_there(fake_rm, monkeypatch):
    # The triggerer may pick the trigger up seconds later, when the application already runs: the state
    # at submission is logged by the task itself, and the trigger logs only what comes after it.
    # (the fake RM moves an application on at every request: publishing the links reads one state)
    states = [("ACCEPTED", "UNDEFINED")] * 2 + [("RUNNING", "UNDEFINED")] * 2 + [("FINISHED", "SUCCEEDED")]
    op, _ = _operator(fake_rm, monkeypatch, deferrable=True, states=states)
    lines: list[str] = []
    monkeypatch.setattr(op.log, "info", lambda fmt, *args: lines.append(fmt % args))
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(task_context())
    trigger = deferred.value.trigger
    app = trigger.application_id
    assert f"{app} ACCEPTED UNDEFINED" in lines and trigger.seen_state == ["ACCEPTED", "UNDEFINED"]

    logged: list[str] = []
    monkeypatch.setattr(trigger.log, "info", lambda fmt, *args: logged.append(fmt % args))
    classpath, kwargs = trigger.serialize()
    assert kwargs["seen_state"] == ["ACCEPTED", "UNDEFINED"]
    assert [e["status"] for e in _events(trigger)] == ["success"]
    assert logged == [f"{app} RUNNING UNDEFINED", f"{app} FINISHED SUCCEEDED"]


def test_operator_on_kill_kills_its_application(fake_rm, monkeypatch):
    op, _ = _operator(fake_rm, monkeypatch, wait_for_completion=False, states=[("RUNNING", "UNDEFINED")])
    op.execute(task_context())
    op.on_kill()
    assert fake_rm.apps["application_1700000000000_0001"].killed_by == "alice"


@pytest.mark.parametrize("prior, submits", [
    ([("RUNNING", "UNDEFINED"), ("FINISHED", "SUCCEEDED")], 0),  # still running: reconnect
    ([("FINISHED", "SUCCEEDED")], 0),  # already succeeded: just return it
    ([("FINISHED", "FAILED")], 1),  # failed: a fresh submission
])
def test_operator_retry_reconnects_instead_of_submitting_again(fake_rm, monkeypatch, prior, submits):
    fake_rm.apps[APP] = FakeApp(prior)
    op, client = _operator(fake_rm, monkeypatch)
    ctx = task_context(DictStore(**{TensorFlowOnYarnOperator.external_id_key: APP}))
    result = op.execute(ctx)
    assert len(client.submitted) == submits
    assert (result == APP) == (submits == 0)
    assert ctx["ti"].xcoms["final_status"] == "SUCCEEDED" and ctx["ti"].xcoms["application_id"] == result


def test_operator_templates_its_string_arguments():
    op = TensorFlowOnYarnOperator(task_id="t", cluster_requirement="worker:{{ params.n }}",
                                  command="train.py --date {{ ds }}", output_path="hdfs:///m/{{ ds }}",
                                  env={"RUN": "{{ run_id }}"}, yarn_queue="{{ params.q }}")
    op.render_template_fields({"params": {"n": 2, "q": "ml"}, "ds": "2026-11-21", "run_id": "r1"})
    assert (op.cluster_requirement, op.command, op.output_path, op.env, op.yarn_queue) == (
        "worker:2", "train.py --date 2026-11-21", "hdfs:///m/2026-11-21", {"RUN": "r1"}, "ml")


# ------------------------------------------------------------------- links
def test_links_read_the_url_xcoms_and_hide_when_empty(monkeypatch):
    from tony_airflow.providers.yarn.links import yarn as links

    values = {"tracking_url": "http://rm/proxy/app/", "tensorboard_url": ""}  # a task from before links_by_try
    monkeypatch.setattr(links, "read_xcom", lambda ti_key, key: values.get(key))
    assert YarnApplicationLink().get_link(None, ti_key=object()) == "http://rm/proxy/app/"
    assert TensorBoardLink().get_link(None, ti_key=object()) == ""
    assert {YarnApplicationLink().name, TensorBoardLink().name} == {"YARN application", "TensorBoard"}


# ------------------------------------------------------------------ sensor
def _sensor(**kwargs) -> YarnApplicationSensor:
    return YarnApplicationSensor(task_id="wait", application_id=APP, yarn_conn_id="fake_yarn",
                                 poke_interval=0.01, **kwargs)


def test_sensor_pokes_until_succeeded(fake_rm):
    fake_rm.apps[APP] = FakeApp(RUNNING + [("FINISHED", "SUCCEEDED")])
    sensor = _sensor()
    results = [sensor.poke({}) for _ in range(4)]
    assert results[:3] == [False, False, False]
    assert isinstance(results[3], PokeReturnValue) and results[3].xcom_value == APP


@pytest.mark.parametrize("final", ["FAILED", "KILLED"])
def test_sensor_fails_without_retry_with_the_diagnostics(fake_rm, final):
    fake_rm.apps[APP] = FakeApp([(final if final == "KILLED" else "FINISHED", final)], diagnostics="ps:0 lost")
    with pytest.raises(AirflowFailException, match=f"{APP} {final}: ps:0 lost"):
        _sensor().poke({})


def test_sensor_refuses_what_is_not_an_application_id(fake_rm):
    with pytest.raises(AirflowFailException, match="application_id: 'None' is not a YARN application id"):
        YarnApplicationSensor(task_id="w", application_id="None", yarn_conn_id="fake_yarn").poke({})
    assert fake_rm.requests == []


def test_sensor_deferrable_defers_while_running_and_not_when_done(fake_rm):
    fake_rm.apps[APP] = FakeApp([("RUNNING", "UNDEFINED")])
    with pytest.raises(TaskDeferred) as deferred:
        _sensor(deferrable=True, timeout=60).execute({})
    assert deferred.value.trigger.kill_on_task_kill is False  # a sensor does not own the application
    fake_rm.apps[APP] = FakeApp([("FINISHED", "SUCCEEDED")])
    assert _sensor(deferrable=True).execute({}) == APP
    with pytest.raises(AirflowFailException, match="FAILED: boom"):
        _sensor().execute_complete({}, {"status": "failed", "application_id": APP, "final_status": "FAILED",
                                        "diagnostics": "boom"})


# ------------------------------------------------------------ issue #15
def test_operator_reconnect_keeps_the_tensorboard_link_of_a_job_file(fake_rm, monkeypatch, tmp_path):
    """A job file (conf as a path) that asks for TensorBoard: a retry that reconnects still links it."""
    job_file = tmp_path / "job.yaml"
    job_file.write_text("tensorboard: true\noutput: hdfs:///out\n")
    fake_rm.apps[APP] = FakeApp([("RUNNING", "UNDEFINED"), ("FINISHED", "SUCCEEDED")])
    op, client = _operator(fake_rm, monkeypatch, conf=str(job_file))
    ctx = task_context(DictStore(**{TensorFlowOnYarnOperator.external_id_key: APP}))
    assert op.execute(ctx) == APP and not client.submitted
    assert ctx["ti"].xcoms["tensorboard_url"].endswith("/pages/tensorboard/")


@pytest.mark.parametrize("bad", ["application_foo", "application_1_", "application_1_2\n", "x application_1_2"])
def test_sensor_uses_the_one_application_id_pattern(fake_rm, bad):
    with pytest.raises(AirflowFailException, match="is not a YARN application id"):
        YarnApplicationSensor(task_id="w", application_id=bad, yarn_conn_id="fake_yarn").poke({})
    assert fake_rm.requests == []


def test_a_deferring_operator_defers_even_when_the_rm_does_not_answer_its_last_look(fake_rm, monkeypatch):
    op, _ = _operator(fake_rm, monkeypatch, deferrable=True)
    calls: list[str] = []
    answered = op.hook.application_report

    def answers_once(app_id):  # publishing the links reads the report; the look before deferring fails
        calls.append(app_id)
        if len(calls) > 1:
            raise ResourceManagerError("no ResourceManager answered: connection refused")
        return answered(app_id)

    monkeypatch.setattr(op.hook, "application_report", answers_once)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(task_context())
    assert deferred.value.trigger.seen_state is None and len(calls) == 2


def test_a_retry_after_publishing_failed_reconnects_instead_of_submitting_a_duplicate(fake_rm, monkeypatch):
    """Issue #30 item 2: an RM call and three XCom pushes ran before the mixin stored the application id;
    when one of them failed, the retry submitted a second application beside the first."""
    op, client = _operator(fake_rm, monkeypatch)
    store = DictStore()
    first = task_context(store)

    def broken_push(key, value):
        raise RuntimeError("the API server did not answer")

    first["ti"].xcom_push = broken_push
    with pytest.raises(RuntimeError, match="did not answer"):
        op.execute(first)
    assert len(client.submitted) == 1
    app = store.get(TensorFlowOnYarnOperator.external_id_key)
    assert app, "the id must be stored before anything else can fail"
    retry, client_again = _operator(fake_rm, monkeypatch)
    ctx = task_context(store)
    assert retry.execute(ctx) == app
    assert client_again.submitted == [] and ctx["ti"].xcoms["application_id"] == app
