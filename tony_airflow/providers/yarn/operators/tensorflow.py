"""`TensorFlowOnYarnOperator`: one distributed TensorFlow job on YARN as one Airflow task.

The arguments mirror the job spec of `ytf-submit`; they are mapped onto the
core's options and submitted through the core client, nothing else. The
application id is kept in Airflow 3.3's task state store (ResumableJobMixin),
so a retry after a worker crash reconnects to the running application instead
of submitting a second one.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any

from airflow.sdk import Asset, BaseOperator, ResumableJobMixin
from airflow.sdk import conf as airflow_conf
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from tony_airflow.core.client import TonyClient
from tony_airflow.core.history import reader
from tony_airflow.core.history.model import JobHistory
from tony_airflow.core.history.store import HistoryStore, history_dir
from tony_airflow.core.job_usage import job_usage, peaks_of, usage_line
from tony_airflow.core.output_follow import FollowState, LiveOutput
from tony_airflow.core.presentation import failure_line, tensorboard_url, training_line
from tony_airflow.core.protocol import Progress
from tony_airflow.core.spec import JobSpec, build_job_spec, load_job_file
from tony_airflow.core.training_result import final_training, last_training
from tony_airflow.errors import UsageError
from tony_airflow.providers.yarn.connection import http_auth
from tony_airflow.providers.yarn.hooks.yarn import YarnHook
from tony_airflow.providers.yarn.lineage import (
    dataset_name,
    operator_lineage,
    parent_run_env,
    read_metrics,
    task_transport_env,
)
from tony_airflow.providers.yarn.links.yarn import (
    APPLICATION_ID_KEY,
    FINAL_STATUS_KEY,
    TENSORBOARD_URL_KEY,
    TRACKING_URL_KEY,
    TensorBoardLink,
    YarnApplicationLink,
    record_try,
)
from tony_airflow.providers.yarn.training import TRAINING_KEY, ProgressLines
from tony_airflow.providers.yarn.triggers.yarn import YarnApplicationTrigger
from tony_airflow.yarn.discovery import require_conf_dir
from tony_airflow.yarn.hadoop_conf import HadoopConf
from tony_airflow.yarn.hdfs import hdfs_path
from tony_airflow.yarn.rest import ACTIVE_STATES, ApplicationReport, ResourceManagerError

USAGE_KEY = "usage"
YARN_TAG_MAX = 100  # YARN refuses longer application tags


def airflow_tags(context: Mapping[str, Any]) -> list[str]:
    """YARN tags that lead from an application back to its DAG, task and run (and let operators find it)."""
    ti = context.get("ti")
    run_id = context.get("run_id") or getattr(ti, "run_id", "")
    pairs = [("airflow_dag_id", getattr(ti, "dag_id", "")), ("airflow_task_id", getattr(ti, "task_id", "")),
             ("airflow_run_id", run_id)]
    return ["airflow"] + [f"{k}:{v}".replace(",", "_")[:YARN_TAG_MAX] for k, v in pairs if v]


def status_word(report: ApplicationReport) -> str:
    """One word for ResumableJobMixin: the YARN state while active, the final status once ended."""
    return report.final_status if report.is_terminal else report.state


class TensorFlowOnYarnOperator(ResumableJobMixin, BaseOperator):
    """Submit a distributed training job (TensorFlow, PyTorch or any command: ``framework``) to YARN and (by
    default) wait for it.

    :param command: the command every task runs (DTF_* and the framework's variables, such as TF_CONFIG, are set)
    :param cluster_requirement: task types and counts, e.g. ``"ps:1,worker:2"``
    :param tasks: instead of ``cluster_requirement``, a mapping ``type -> {instances, memory, vcores,
        gpus, node_label, command}``
    :param task_memory: ``"2048"``, ``"2 GiB"``, ``"worker:4 GiB"``, ``"worker[0]:8192"`` or a list of those
        (the most specific wins)
    :param task_vcores: as ``task_memory``, in vcores
    :param task_gpus: as ``task_memory``, in GPUs (``yarn.io/gpu``)
    :param script: a local file shipped to every task (``DTF_TASK_SCRIPT``)
    :param src_dir: a local directory shipped to every task; the command runs inside it
    :param python_venv: a packed environment (venv-pack .tar.gz, local or hdfs://) whose Python runs the tasks
    :param input_path: ``DTF_INPUT_PATH``: what the tasks read (an hdfs:// path, or a local one staged)
    :param output_path: ``DTF_OUTPUT_PATH``: where the tasks write; every file in it whole or absent
    :param tensorboard: start a TensorBoard task over ``output_path``, linked from the task
    :param yarn_queue: the YARN queue (``queue`` is taken: BaseOperator's executor queue); default: the
        connection's ``queue`` extra, else ``default``
    :param docker_image: the image the tasks run in (``"IMAGE"``, or a list with ``"TYPE:IMAGE"`` forms); the
        engine, mounts and user come from ``conf`` (``docker_engine``, ``docker_mounts``, ``docker_user``)
    :param framework: ``"tensorflow"`` (default: ``TF_CONFIG``), ``"pytorch"`` (``MASTER_ADDR``, ``RANK``,
        ``WORLD_SIZE``, TonY's ``INIT_METHOD``/``WORLD``, and torchrun's ``PET_*`` settings) or ``"generic"``
    :param nproc_per_node: PyTorch: the processes a ``torchrun`` command starts in each container, ``2`` or
        ``"worker:2"`` (default 1)
    :param elastic: PyTorch: ``"MIN:MAX"`` workers; a lost worker's container is replaced without restarting
        the others (MAX is the number of workers)
    :param spares: with ``elastic``: worker containers started beside the workers that wait to take a lost
        worker's place at once; the AM asks for a new one after each (default 0)
    :param application_name: the YARN application name (``ytf-submit -n``)
    :param node_label: YARN node label, ``"LABEL"`` or ``"TYPE:LABEL"`` (``--node-label``)
    :param env: environment variables for every task (``--env``)
    :param max_attempts: whole-cluster attempts (``--max-attempts``, default 1)
    :param max_free_retries: retries after a preemption or a lost host that do not count as attempts
        (``--max-free-retries``, default 5)
    :param am_attempts: YARN application attempts: a lost AM starts a new one that goes on (``--am-attempts``)
    :param conf: a YAML/JSON job file path, or a mapping of further job fields (timeouts, tracked, ...);
        the explicit arguments win over it
    :param yarn_conn_id: the ``yarn`` connection (without ``yarn_default``: HADOOP_CONF_DIR or the local cluster)
    :param wait_for_completion: wait for the application to end (else return once submitted)
    :param deferrable: wait in the triggerer instead of holding a worker slot
    :param poll_interval: seconds between ResourceManager polls while waiting
    :param stream_logs: write the chief's (or worker 0's) own output into this task's log as it comes
        (also while deferred), each line prefixed with the task id
    :param log_tail_lines: at most this many new lines per poll (older ones are skipped, said so), and the
        failing task's last lines shown when the job fails
    :param openlineage_inject_parent_job_info: with Airflow's OpenLineage provider configured, give every
        container this task's OpenLineage run as its parent (``OPENLINEAGE_PARENT_ID``,
        ``OPENLINEAGE_ROOT_PARENT_ID``, ``OPENLINEAGE_CONTEXT``; default on, unless ``env`` names one)
    :param openlineage_inject_transport_info: also give them the provider's transport
        (``OPENLINEAGE__TRANSPORT__*``: HTTP, or composite of HTTP; default off: it may hold an API key)
    """

    template_fields: Sequence[str] = (
        "command", "cluster_requirement", "tasks", "task_memory", "task_vcores", "task_gpus", "script",
        "src_dir", "python_venv", "input_path", "output_path", "yarn_queue", "application_name", "node_label",
        "docker_image", "env", "conf", "framework",
    )
    template_fields_renderers = {"command": "bash", "env": "json", "tasks": "json", "conf": "json"}
    operator_extra_links = (YarnApplicationLink(), TensorBoardLink())
    ui_color = "#ffa040"
    external_id_key = "yarn_application_id"

    def __init__(
        self,
        *,
        command: str | None = None,
        cluster_requirement: str | None = None,
        tasks: Mapping[str, Any] | None = None,
        task_memory: str | int | Sequence[str] | None = None,
        task_vcores: str | int | Sequence[str] | None = None,
        task_gpus: str | int | Sequence[str] | None = None,
        script: str | None = None,
        src_dir: str | None = None,
        python_venv: str | None = None,
        input_path: str | None = None,
        output_path: str | None = None,
        tensorboard: bool = False,
        yarn_queue: str | None = None,
        application_name: str | None = None,
        node_label: str | Sequence[str] | None = None,
        docker_image: str | Sequence[str] | None = None,
        framework: str | None = None,
        nproc_per_node: str | int | Sequence[str] | None = None,
        elastic: str | None = None,
        spares: int | str | None = None,
        env: Mapping[str, str] | None = None,
        conf: str | Mapping[str, Any] | None = None,
        max_attempts: int | None = None,
        max_free_retries: int | None = None,
        am_attempts: int | None = None,
        yarn_conn_id: str = YarnHook.default_conn_name,
        wait_for_completion: bool = True,
        deferrable: bool = airflow_conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: float = 5.0,
        stream_logs: bool = True,
        log_tail_lines: int = 100,
        openlineage_inject_parent_job_info: bool = True,
        openlineage_inject_transport_info: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.command = command
        self.cluster_requirement = cluster_requirement
        self.tasks = tasks
        self.task_memory = task_memory
        self.task_vcores = task_vcores
        self.task_gpus = task_gpus
        self.script = script
        self.src_dir = src_dir
        self.python_venv = python_venv
        self.input_path = input_path
        self.output_path = output_path
        self.tensorboard = tensorboard
        self.yarn_queue = yarn_queue
        self.application_name = application_name
        self.node_label = node_label
        self.docker_image = docker_image
        self.framework = framework
        self.nproc_per_node = nproc_per_node
        self.elastic = elastic
        self.spares = spares
        self.env = env
        self.conf = conf
        self.max_attempts = max_attempts
        self.max_free_retries = max_free_retries
        self.am_attempts = am_attempts
        self.yarn_conn_id = yarn_conn_id
        self.wait_for_completion = wait_for_completion
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.stream_logs = stream_logs
        self.log_tail_lines = log_tail_lines
        self.openlineage_inject_parent_job_info = openlineage_inject_parent_job_info
        self.openlineage_inject_transport_info = openlineage_inject_transport_info
        self.application_id: str | None = None
        self._submitted_tensorboard: bool | None = None  # the job this try submitted asked for TensorBoard
        self._client: TonyClient | None = None
        self._lines = ProgressLines()  # progress lines for the log; the training's numbers last seen
        self.final_training: dict[str, Any] | None = None  # XCom `training`, for the OpenLineage facet

    @cached_property
    def hook(self) -> YarnHook:
        return YarnHook(yarn_conn_id=self.yarn_conn_id)

    # --------------------------------------------------------------- the job
    def job_options(self, context: Mapping[str, Any]) -> dict[str, Any]:
        """The operator's arguments as the core's job options (conf first, arguments over it)."""
        if isinstance(self.conf, str) and self.conf.strip():
            opts = load_job_file(self.conf)
        elif isinstance(self.conf, Mapping):
            opts = dict(self.conf)
        elif self.conf:
            raise UsageError(f"conf: expected a job file path or a mapping, not {type(self.conf).__name__}")
        else:
            opts = {}
        explicit = {
            "command": self.command, "cluster_requirement": self.cluster_requirement, "tasks": self.tasks,
            "task_memory": self.task_memory, "task_vcores": self.task_vcores, "task_gpus": self.task_gpus,
            "script": self.script, "src_dir": self.src_dir, "python_venv": self.python_venv,
            "input": self.input_path, "output": self.output_path, "tensorboard": self.tensorboard or None,
            "queue": self.yarn_queue or self.hook.settings.queue, "name": self.application_name or self.task_id,
            "node_label": self.node_label, "docker_image": self.docker_image, "max_attempts": self.max_attempts,
            "max_free_retries": self.max_free_retries, "am_attempts": self.am_attempts,
            "framework": self.framework, "nproc_per_node": self.nproc_per_node, "elastic": self.elastic,
            "spares": self.spares,
        }
        for key, value in explicit.items():
            if value is None or value == "":
                continue
            if key in ("cluster_requirement", "tasks"):  # one of the two describes the task types
                opts.pop("tasks" if key == "cluster_requirement" else "cluster_requirement", None)
            opts[key] = value
        if self.env:
            opts["env"] = {**(opts.get("env") or {}), **dict(self.env)}
        user_env = dict(opts.get("env") or {})  # with the OpenLineage provider: the parent run (and transport)
        lineage = parent_run_env(context.get("ti"), user_env) if self.openlineage_inject_parent_job_info else {}
        if self.openlineage_inject_transport_info:
            lineage.update(task_transport_env(user_env))
        if lineage:
            opts["env"] = {**lineage, **user_env}
        given = opts.get("tags") or []
        given = given.split(",") if isinstance(given, str) else list(given)
        opts["tags"] = given + airflow_tags(context)
        if opts.get("client"):
            raise UsageError("client: the operator runs every task on YARN; drop 'client' from conf")
        return opts

    def build_job(self, context: Mapping[str, Any]) -> JobSpec:
        lines = self.log_tail_lines
        if isinstance(lines, bool) or not isinstance(lines, int) or lines < 0:
            raise AirflowFailException(f"log_tail_lines: {lines!r} is not allowed; allowed: a whole number >= 0")
        try:
            return build_job_spec(self.job_options(context))
        except UsageError as exc:  # bad input: fail now, without retries, with the one line
            raise AirflowFailException(str(exc)) from None

    # ------------------------------------------------- ResumableJobMixin API
    def execute(self, context: Any) -> str | None:
        try:
            return self.execute_resumable(context)
        finally:
            self._close_client()

    def submit_job(self, context: Any) -> str:
        job = self.build_job(context)
        try:
            handle = self._tony_client().submit(job)
        except UsageError as exc:  # refused by the cluster's limits: same as bad input
            raise AirflowFailException(str(exc)) from None
        self.application_id = handle.app_id
        self._submitted_tensorboard = job.tensorboard
        self.log.info("Submitted application %s", handle.app_id)
        # Nothing else here: the mixin stores the id when this returns, and anything that could fail before
        # (an RM call, an XCom push) would make a retry submit a second application. Links: poll_until_complete.
        return handle.app_id

    def get_job_status(self, external_id: Any, context: Any) -> str:
        return status_word(self.hook.application_report(str(external_id)))

    def is_job_active(self, status: str) -> bool:
        return status in ACTIVE_STATES

    def is_job_succeeded(self, status: str) -> bool:
        return status == "SUCCEEDED"

    # Returns the id: ResumableJobMixin returns poll_until_complete's value when it reconnects.
    def poll_until_complete(self, external_id: Any, context: Any) -> str:  # type: ignore[override]
        """Wait (here or in the triggerer); returns the id, which the mixin returns on a reconnect."""
        app_id = str(external_id)
        if self.application_id != app_id:  # reconnecting after a crash: the XComs of this try are new
            self.application_id = app_id
            self._submitted_tensorboard = None
            self.log.info("Reconnected to application %s", app_id)
        board = self._submitted_tensorboard
        self._publish(context, app_id, tensorboard=self._wants_tensorboard() if board is None else board)
        if not self.wait_for_completion:
            return app_id
        if self.deferrable:
            # The triggerer may start the trigger seconds from now: the state the application is in
            # as the task defers goes into the log here, and the trigger logs only what follows.
            seen: list[str] | None = None
            try:
                report = self.hook.application_report(app_id)
                seen = [report.state, report.final_status]
                self.log.info("%s %s %s", app_id, report.state, report.final_status)
            except ResourceManagerError as exc:  # the trigger reads it, and retries, soon enough
                self.log.warning("%s: no state before deferring: %s", app_id, exc)
            self.defer(trigger=YarnApplicationTrigger.for_settings(
                self.hook.settings, app_id, self.poll_interval, stream_logs=self.stream_logs,
                log_tail_lines=self.log_tail_lines, seen_state=seen), method_name="execute_complete")
        handle = self._tony_client().handle(app_id)
        live = self._live_output() if self.stream_logs else None
        report = handle.wait(poll=self.poll_interval, on_change=self._log_change, on_poll=live)
        if live is not None:
            self._finish_output(live, report.id, report.final_status, report.diagnostics)
        self._conclude(context, report.id, report.final_status, report.diagnostics, seen=self._lines.training)
        return app_id

    def get_job_result(self, external_id: Any, context: Any) -> str:
        if self.application_id != external_id:  # already SUCCEEDED before this try began
            self.application_id = str(external_id)
            self._publish(context, str(external_id), tensorboard=self._wants_tensorboard())
            context["ti"].xcom_push(key=FINAL_STATUS_KEY, value="SUCCEEDED")
        return str(external_id)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> str:
        """Resumed from YarnApplicationTrigger."""
        self.application_id = event.get("application_id")
        if event.get("status") == "error":
            raise AirflowException(event.get("message") or "the trigger failed")
        if self.stream_logs:
            live = self._live_output(FollowState.from_dict(event.get("follow")))
            self._finish_output(live, event["application_id"], event["final_status"], event.get("diagnostics", ""))
        try:
            self._conclude(context, event["application_id"], event["final_status"], event.get("diagnostics", ""),
                           seen=event.get(TRAINING_KEY))
        finally:
            self._close_client()
        return event["application_id"]

    def on_kill(self) -> None:
        """The task was killed (mark failed, timeout, SIGTERM): the application goes with it."""
        app_id = self.application_id
        if not app_id:
            return
        try:
            if not self.hook.application_report(app_id).is_terminal:
                self.log.info("Killing application %s", app_id)
                self.hook.kill_application(app_id)
        except Exception:
            self.log.exception("Could not kill application %s", app_id)

    # --------------------------------------------------------------- helpers
    def _tony_client(self) -> TonyClient:
        if self._client is None:
            try:
                self._client = self.hook.tony_client()
            except UsageError as exc:
                raise AirflowFailException(str(exc)) from None
        return self._client

    def _close_client(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _wants_tensorboard(self) -> bool:
        """Whether the job has TensorBoard, by the same rule as submission (arguments over conf,
        conf a mapping or a job file): a retry that reconnects links it too."""
        return bool(self.tensorboard or self._conf_fields().get("tensorboard"))

    def _conf_fields(self) -> Mapping[str, Any]:
        """`conf` as a mapping (a job file read), or empty when it is none or unreadable (after submission)."""
        try:
            conf = load_job_file(self.conf) if isinstance(self.conf, str) and self.conf.strip() else self.conf
        except UsageError:
            return {}
        return conf if isinstance(conf, Mapping) else {}

    def _publish(self, context: Any, app_id: str, tensorboard: bool) -> None:
        """XComs and links right after submission, so the UI links to the job while it runs."""
        report = self.hook.application_report(app_id)
        tracking = report.tracking_url or f"{self.hook.settings.rm_addresses[0].rstrip('/')}/proxy/{app_id}/"
        board = tensorboard_url(tracking) if tensorboard else ""
        ti = context["ti"]
        ti.xcom_push(key=APPLICATION_ID_KEY, value=app_id)
        ti.xcom_push(key=TRACKING_URL_KEY, value=tracking)
        ti.xcom_push(key=TENSORBOARD_URL_KEY, value=board)
        YarnApplicationLink.persist(context, tracking)
        TensorBoardLink.persist(context, board)
        record_try(context, app_id, tracking, board)  # a past try's links keep leading to its own application
        self.log.info("Tracking URL: %s", tracking)
        if board:
            self.log.info("TensorBoard: %s", board)

    def _live_output(self, state: FollowState | None = None) -> LiveOutput:
        s = self.hook.settings
        return LiveOutput(lambda line: self.log.info("%s", line), auth=http_auth(s), conf_dir=s.hadoop_conf_dir,
                          max_lines=self.log_tail_lines, state=state)

    def _finish_output(self, live: LiveOutput, app_id: str, final_status: str, diagnostics: str) -> None:
        """The lines not streamed yet (from the aggregated logs); on failure the failing task's last lines."""
        try:
            live.finish(app_id, final_status, diagnostics, self.log_tail_lines)
        except Exception as exc:  # the output is a help; how the job ended is what counts
            self.log.warning("could not read the rest of the output of %s: %s", app_id, exc)

    def _log_change(self, report: ApplicationReport, progress: Progress | None) -> None:
        line = self._lines.line(report.id, report, progress, time.monotonic())
        if line:
            self.log.info("%s", line)

    def _history(self, app_id: str) -> JobHistory | None:
        """The job's history (its events: peaks, the training's final numbers); None when unreadable."""
        try:
            where = history_dir(self._conf_fields().get("history_dir"))
            store = (HistoryStore.open(where) if where.startswith("file://")
                     else HistoryStore(self.hook.hdfs(), hdfs_path(where)))
            return reader.load_by_id(store, app_id, with_spec=False)
        except Exception as exc:  # what comes from it is a help, never the outcome
            self.log.info("no history for %s: %s", app_id, exc)
            return None

    def _push_usage(self, context: Any, app_id: str, history: JobHistory | None) -> None:
        """XCom `usage` and one line: YARN's resource-seconds and each task's peak memory (the history)."""
        try:
            report = self.hook.application_report(app_id)
        except Exception as exc:
            self.log.warning("no usage for %s: %s", app_id, exc)
            return
        peaks = peaks_of(history) if history is not None else {}
        usage = job_usage(report, peaks)
        context["ti"].xcom_push(key=USAGE_KEY, value=usage)
        self.log.info("%s %s", app_id, usage_line(usage))

    def _remove_staging(self, app_id: str) -> None:
        """skein's AM removes the staging directory only after unregistering: this task may see the end
        first. Housekeeping: never the task's outcome (the next submission's sweep takes what is left)."""
        try:
            self._tony_client().remove_staging(app_id, wait_s=0)
        except Exception as exc:
            self.log.info("the staging directory of %s stays for the next sweep: %s", app_id, exc)

    def _push_training(self, context: Any, app_id: str, history: JobHistory | None,
                       seen: dict[str, Any] | None) -> None:
        """XCom `training`: the final numbers (the history's last TRAINING event, else the last seen) with
        the application id, and one line of them; nothing when the program never reported."""
        training = (last_training(history.events) if history is not None else None) or seen
        self.final_training = final_training(app_id, training)
        if self.final_training is None:
            return
        context["ti"].xcom_push(key=TRAINING_KEY, value=self.final_training)
        self.log.info("%s training: %s", app_id, training_line(self.final_training))

    def _conclude(self, context: Any, app_id: str, final_status: str, diagnostics: str,
                  seen: dict[str, Any] | None = None) -> None:
        self._remove_staging(app_id)
        history = self._history(app_id)
        self._push_usage(context, app_id, history)
        self._push_training(context, app_id, history, seen)
        context["ti"].xcom_push(key=FINAL_STATUS_KEY, value=final_status)
        if final_status != "SUCCEEDED":
            raise AirflowException(failure_line(app_id, final_status, diagnostics))
        self.log.info("%s SUCCEEDED", app_id)
        self._asset_events(context, app_id, final_status)

    def _asset_events(self, context: Any, app_id: str, final_status: str) -> None:
        """Outlet assets (the trained model) get an event saying which run made it and how it did."""
        assets = [o for o in (self.outlets or []) if isinstance(o, Asset)]
        events = context.get("outlet_events")
        if not assets or events is None:
            return
        extra: dict[str, Any] = {"application_id": app_id, "final_status": final_status,
                                 "output_path": self.output_path or "", "input_path": self.input_path or ""}
        if self.final_training is not None:
            extra[TRAINING_KEY] = self.final_training
        if self.output_path:
            try:
                extra["metrics"] = read_metrics(self.hook.hdfs(), hdfs_path(self.output_path))
            except Exception as exc:
                self.log.info("no training metrics for the asset event: %s", exc)
        for asset in assets:
            events[asset].extra.update(extra)

    # ------------------------------------------------------------ OpenLineage
    def _default_fs(self) -> str | None:
        try:
            conf_dir = self.hook.settings.hadoop_conf_dir or require_conf_dir()
            return HadoopConf.load(conf_dir).get("fs.defaultFS")
        except Exception:
            return None

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The job's input and output as datasets, the YARN application as the run's external query."""
        default_fs = self._default_fs()
        inputs = [dataset_name(self.input_path, default_fs)] if self.input_path else []
        outputs = [dataset_name(self.output_path, default_fs)] if self.output_path else []
        return operator_lineage(inputs, outputs, self.application_id, self.final_training)

