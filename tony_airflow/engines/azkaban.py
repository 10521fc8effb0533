"""The Azkaban jobtype's entry point: `$JOB_PROP_FILE` -> job spec -> YARN, for `type=tensorflow`.

Azkaban's ProcessJob runs this (`tony-azkaban`, named by the plugin's
`plugin.properties`) with the job's flattened properties in $JOB_PROP_FILE and
reads $JOB_OUTPUT_PROP_FILE back for the downstream jobs. Keys are TonY's own
Azkaban jobtype keys and the job fields of `ytf-submit` (docs/submitting.md); keys in our namespaces that
we do not know (or that look like a typo of one) are refused in one line.
Other keys are left alone: Azkaban puts its own and the flow's parameters in
the same file.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
import sys
from collections.abc import Mapping
from typing import Any

import javaproperties

from tony_airflow.core.runner import Outcome, run_to_completion
from tony_airflow.core.spec import build_job_spec
from tony_airflow.core.spec_values import parse_env_pairs
from tony_airflow.core.training_result import output_properties, read_final_training
from tony_airflow.errors import UsageError
from tony_airflow.files import write_whole

# ytf-submit / job-file fields accepted as they are; ytf-submit's `command` is `task_command` here, because
# `command` is what Azkaban's ProcessJob itself runs (this entry point, set by plugin.properties)
SEED_KEYS = ("cluster_requirement", "task_command", "task_memory", "task_vcores", "task_gpus", "node_label", "input",
             "output", "script", "docker_image", "docker_runtime", "docker_engine", "docker_mounts", "docker_user",
             "name", "queue", "max_attempts", "max_free_retries", "am_attempts",
             "am_attempts_validity", "tensorboard", "framework", "python", "tracked", "untracked", "sidecar", "tags",
             "spread", "am_node_label", "nproc_per_node", "elastic", "spares")
# TonY's Azkaban jobtype keys
TONY_KEYS = ("executes", "task_params", "src_dir", "python_venv", "python_binary_path", "tensorboard_log_dir")
TONY_APPLICATION_KEYS = {"tony.application.name": "name", "tony.application.tags": "tags",
                         "tony.application.timeout": "timeout", "tony.yarn.queue": "queue",
                         "tony.application.tensorboard-log-dir": "tensorboard_log_dir",
                         "tony.history.location": "history_dir", "tony.application.framework": "framework"}
NOT_TASKS = ("tony.application.", "tony.yarn.", "tony.history.", "tony.docker.")  # tony.<type>.<field> never starts so
TONY_TASK = re.compile(r"^tony\.(?P<type>[a-z][a-z0-9_]*)\.(?P<field>[a-z-]+)$")
TONY_TASK_FIELDS = {"instances": "instances", "memory": "memory", "vcores": "vcores", "gpus": "gpus",
                    "node-label": "node_label", "command": "command"}
ENV_PREFIX = "worker_env."
# TonY's Docker keys (tony.docker.<type>.image besides these)
TONY_DOCKER_KEYS = ("tony.docker.enabled", "tony.docker.containers.image", "tony.docker.containers.mount")
TONY_DOCKER_TYPE_IMAGE = re.compile(r"^tony\.docker\.(?P<type>[a-z][a-z0-9_]*)\.image$")
OURS = SEED_KEYS + TONY_KEYS + tuple(TONY_APPLICATION_KEYS) + TONY_DOCKER_KEYS
# what Azkaban itself writes into every job's properties
AZKABAN_TAG_KEYS = {"azkaban.flow.execid": "azkaban_exec_id", "azkaban.flow.flowid": "azkaban_flow_id",
                    "azkaban.flow.projectname": "azkaban_project", "azkaban.job.id": "azkaban_job_id"}


def read_job_props(path: str) -> dict[str, str]:
    """Java properties syntax, escapes and continuation lines included (the `javaproperties` package)."""
    try:
        with open(path, encoding="latin-1") as fh:  # Java's Properties.load reads ISO 8859-1
            return javaproperties.load(fh)
    except OSError as exc:
        raise UsageError(f"JOB_PROP_FILE: cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError(f"JOB_PROP_FILE: {path} is not a Java properties file: {exc}") from None


def _check_unknown(props: Mapping[str, str]) -> None:
    for key in props:
        if key in OURS or key.startswith(ENV_PREFIX) or TONY_DOCKER_TYPE_IMAGE.match(key):
            continue
        if TONY_TASK.match(key) and key not in TONY_APPLICATION_KEYS and not key.startswith(NOT_TASKS):
            continue
        if key.startswith("tony."):
            raise UsageError(f"{key}: unknown key; allowed: tony.<type>.(instances|memory|vcores|gpus|node-label|"
                             f"command), tony.docker.<type>.image, {', '.join((*TONY_APPLICATION_KEYS, *TONY_DOCKER_KEYS))}")
        near = difflib.get_close_matches(key, OURS, n=1, cutoff=0.85)
        if near:
            raise UsageError(f"{key}: unknown key; did you mean {near[0]!r}?")


def job_options(props: Mapping[str, str]) -> dict[str, Any]:
    """The job's properties as the core's job options."""
    _check_unknown(props)
    opts: dict[str, Any] = {k: v for k, v in props.items() if k in SEED_KEYS and v != ""}
    if "task_command" in opts:
        opts["command"] = opts.pop("task_command")
    for key, field in TONY_APPLICATION_KEYS.items():
        if props.get(key, "") != "":
            opts[field] = props[key]

    tasks: dict[str, dict[str, Any]] = {}
    for key, value in props.items():
        m = TONY_TASK.match(key)
        if not m or key in TONY_APPLICATION_KEYS or key.startswith(NOT_TASKS):
            continue
        known = TONY_TASK_FIELDS.get(m["field"])
        if known is None:
            raise UsageError(f"{key}: unknown task field {m['field']!r}; allowed: {', '.join(TONY_TASK_FIELDS)}")
        tasks.setdefault(m["type"], {})[known] = value
    if tasks:
        if "cluster_requirement" in opts:
            raise UsageError("cluster_requirement: give either cluster_requirement or tony.<type>.instances, not both")
        for type_, body in tasks.items():
            if "instances" not in body:
                raise UsageError(f"tony.{type_}.instances: missing; every tony.{type_}.* needs it")
        opts["tasks"] = tasks

    _docker_options(props, opts)
    env = [f"{k[len(ENV_PREFIX):]}={v}" for k, v in props.items() if k.startswith(ENV_PREFIX)]
    if env:
        opts["env"] = parse_env_pairs(env)

    executes = props.get("executes", "")
    if executes:
        if opts.get("command"):
            raise UsageError("executes: give either executes (+ task_params) or task_command, not both")
        python = props.get("python_binary_path") or "python3"
        if props.get("python_venv") and props.get("python_binary_path"):
            python = f"venv/{props['python_binary_path']}"  # inside the unpacked environment
        opts["command"] = " ".join([shlex.quote(python), shlex.quote(executes), props.get("task_params", "")]).strip()
    elif props.get("task_params"):
        raise UsageError("task_params: needs executes (the Python file the parameters are for)")
    for key in ("src_dir", "python_venv"):
        if props.get(key):
            opts[key] = props[key]

    timeout = opts.pop("timeout", None)
    if timeout is not None:
        try:
            ms = int(timeout)
        except ValueError:
            raise UsageError(f"tony.application.timeout: {timeout!r} is not a number of milliseconds") from None
        opts["timeouts"] = {"application": ms / 1000.0}
    log_dir = opts.pop("tensorboard_log_dir", None) or props.get("tensorboard_log_dir")
    if log_dir:
        output = opts.setdefault("output", log_dir)
        if log_dir.rstrip("/") != output.rstrip("/") and not log_dir.startswith(output.rstrip("/") + "/"):
            raise UsageError(f"tensorboard log dir: {log_dir!r} must be the output path {output!r} or under it "
                             "(TensorBoard reads the output path)")
        opts["tensorboard"] = True
    if "tensorboard" in opts and isinstance(opts["tensorboard"], str):
        value = opts["tensorboard"].strip().lower()
        if value not in ("true", "false"):
            raise UsageError(f"tensorboard: {opts['tensorboard']!r}; allowed: true, false")
        opts["tensorboard"] = value == "true"
    tags = [t for t in str(opts.get("tags") or "").split(",") if t]
    opts["tags"] = tags + azkaban_tags(props)
    return opts


def _docker_options(props: Mapping[str, str], opts: dict[str, Any]) -> None:
    """TonY's keys: `tony.docker.enabled` switches the images of `tony.docker.containers.image` and
    `tony.docker.<type>.image` on (TonY ignores them without it), `tony.docker.containers.mount` adds mounts."""
    enabled = props.get("tony.docker.enabled", "").strip().lower()
    if enabled not in ("", "true", "false"):
        raise UsageError(f"tony.docker.enabled: {props['tony.docker.enabled']!r}; allowed: true, false")
    if enabled != "true":
        return
    images = [v for v in [props.get("tony.docker.containers.image", "")] if v]
    images += [f"{m['type']}:{v}" for k, v in props.items()
               if (m := TONY_DOCKER_TYPE_IMAGE.match(k)) and v and m["type"] != "containers"]
    if not images and not opts.get("docker_image"):
        raise UsageError("tony.docker.enabled: true, but no image; allowed: tony.docker.containers.image or "
                         "tony.docker.<type>.image")
    if images:
        opts["docker_image"] = ([opts["docker_image"]] if opts.get("docker_image") else []) + images
    mounts = props.get("tony.docker.containers.mount", "")
    if mounts:
        opts["docker_mounts"] = [m.strip() for m in mounts.split(",") if m.strip()]


def azkaban_tags(props: Mapping[str, str]) -> list[str]:
    """`azkaban_exec_id:…`, `azkaban_job_id:…` and the like, from what Azkaban hands the job."""
    return [f"{tag}:{props[key]}"[:100] for key, tag in AZKABAN_TAG_KEYS.items() if props.get(key)]


def identity_tags(props: Mapping[str, str]) -> list[str]:
    """The tags that name this job of this flow execution (the same in a retry of it), or none when
    Azkaban did not give the execution and the job."""
    return azkaban_tags(props) if props.get("azkaban.flow.execid") and props.get("azkaban.job.id") else []


def write_output_props(path: str | None, outcome: Outcome, training: Mapping[str, Any] | None = None) -> None:
    """A flat JSON object: what Azkaban's AbstractProcessJob reads into the job's output properties: the
    outcome's four values and, when the program reported, its final numbers (`training_step`,
    `training_percent`, `metric_loss`...; core/training_result.py)."""
    if not path:
        return
    write_whole(path, json.dumps({**outcome.outputs(), **output_properties(training)}))


def final_training_of(app_id: str, history: str | None) -> dict[str, Any] | None:
    """The job's final training numbers from its history (None when it has none, or it cannot be read)."""
    from tony_airflow.core.history.store import HistoryStore, history_dir

    try:
        return read_final_training(app_id, HistoryStore.open(history_dir(history)))
    except Exception:  # the numbers are a help: the outcome is written without them
        return None


def run(env: Mapping[str, str]) -> int:
    prop_file = env.get("JOB_PROP_FILE")
    if not prop_file:
        raise UsageError("JOB_PROP_FILE: not set; this entry point is run by Azkaban's ProcessJob")
    props = read_job_props(prop_file)
    job = build_job_spec(job_options(props))

    def submitted(app_id: str) -> None:
        print(f"Submitted application {app_id}", flush=True)  # Azkaban finds application ids in the log

    outcome = run_to_completion(job, on_submitted=submitted, log=sys.stdout,
                                on_outcome=lambda o: write_output_props(
                                    env.get("JOB_OUTPUT_PROP_FILE"), o,
                                    final_training_of(o.application_id, job.history_dir)),
                                identity=identity_tags(props))
    return outcome.exit_code
