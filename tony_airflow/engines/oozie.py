"""Oozie: what the action's entry point does, and the workflow that runs it.

The entry point (cli/oozie.py) is what the Oozie action runs on its launcher
node (`python3 -m tony_airflow.cli.oozie <ytf-submit options>`): through the
`<java>` action's main class (oozie_jar.py), which makes its one-line reason the
action's error message, or through a shell action. Oozie captures its stdout as
the action's data (`<capture-output/>`, at most 2 KB), so stdout
carries only `application_id`, `tracking_url`, `tensorboard_url` and
`final_status` as key=value lines; everything else goes to stderr. The
application is tagged with the workflow and action ids and with the tag Oozie 5
kills an action's child applications by; SIGTERM (the launcher container being
killed) kills it too.

`tony oozie workflow` takes the same job options as `ytf-submit` and renders a
complete `workflow.xml` (uri:oozie:workflow:0.5, with shell-action:0.3 for a
shell action, or workflow:1.0 with shell-action:1.0) or only the action element.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2

from tony_airflow.core.runner import Outcome
from tony_airflow.engines.oozie_jar import JAR_NAME, MAIN_CLASS
from tony_airflow.errors import UsageError
from tony_airflow.yarn.hadoop_conf import read_site

ENTRY_MODULE = "tony_airflow.cli.oozie"  # what the generated action runs
ACTION_TYPES = ("java", "shell")
SCHEMAS = {"0.5": "0.3", "1.0": "1.0"}  # workflow schema -> the shell-action schema it is paired with
CAPTURE_LIMIT = 2048  # oozie.action.max.output.data, Oozie's default
ENV_LINK = "tonyenv"  # where a packed launcher environment is unpacked in the launcher's directory


# ----------------------------------------------------------------- entry point
def oozie_tags(env: Mapping[str, str]) -> list[str]:
    """`oozie_workflow_id:…`, `oozie_action_id:…` and Oozie's child tag from the action configuration Oozie
    hands the launcher."""
    path = env.get("OOZIE_ACTION_CONF_XML")
    if not path:
        return []
    try:
        conf = read_site(Path(path))
    except (OSError, ValueError) as exc:
        raise UsageError(f"OOZIE_ACTION_CONF_XML: cannot read {path}: {exc}") from None
    pairs = (("oozie_workflow_id", conf.get("oozie.job.id")), ("oozie_action_id", conf.get("oozie.action.id")))
    tags = [f"{tag}:{value}"[:100] for tag, value in pairs if value]
    # Oozie 5 kills, with the action, every YARN application carrying this tag (its hash of the action):
    # the training is killed by Oozie itself, not only through the launcher's SIGTERM
    child = (conf.get("oozie.child.mapreduce.job.tags") or "").strip().lower()
    return tags + ([child[:100]] if child else [])


def capture_lines(outcome: Outcome) -> str:
    """key=value lines for <capture-output/>, each value cut so that the whole stays under Oozie's limit."""
    each = CAPTURE_LIMIT // len(outcome.outputs()) - 40
    return "".join(f"{key}={str(value)[:each]}\n" for key, value in outcome.outputs().items())


# -------------------------------------------------------------------- generator
def _templates() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("tony_airflow.engines", "oozie_templates"),
                              autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def render(gen: Any, job_argv: Sequence[str]) -> str:
    """The action (or the whole workflow) that runs `job_argv` through the entry point. A java action's main
    class comes from `--action-jar` (a <file>) or, without it, from the workflow application's lib/."""
    if gen.launcher_env and not gen.launcher_env.endswith((".tar.gz", ".tgz", ".zip")):
        raise UsageError(f"launcher-env: {gen.launcher_env} is not an archive; allowed: a venv-pack .tar.gz")
    for name in ("workflow_name", "action_name", "ok", "error"):
        value = getattr(gen, name)
        if not value or any(c in value for c in "<>&\"' "):
            raise UsageError(f"{name.replace('_', '-')}: {value!r}; allowed: a node name without spaces or XML characters")
    python = f"{ENV_LINK}/bin/python" if gen.launcher_env else gen.launcher_python
    env_vars = [f"PATH=./{ENV_LINK}/bin:$PATH"] if gen.launcher_env else []
    if gen.action_jar and not gen.action_jar.endswith(".jar"):
        raise UsageError(f"action-jar: {gen.action_jar} is not a .jar; allowed: the URI of {JAR_NAME} "
                         "(tony oozie jar DIR writes it)")
    files = [*gen.files, *([gen.action_jar] if gen.action_type == "java" and gen.action_jar else [])]
    values: dict[str, Any] = {
        "action_type": gen.action_type, "main_class": MAIN_CLASS,
        "schema": gen.schema, "shell_version": SCHEMAS[gen.schema], "action_name": gen.action_name,
        "exec": python, "arguments": ["-m", ENTRY_MODULE, *job_argv], "env_vars": env_vars, "files": files,
        "archive": gen.launcher_env, "archive_link": ENV_LINK, "ok": gen.ok, "error": gen.error,
        "launcher_memory_mb": gen.launcher_memory, "workflow_name": gen.workflow_name,
    }
    env = _templates()
    action = env.get_template("action.xml.j2").render(**values)
    if gen.action_only:
        return action
    return env.get_template("workflow.xml.j2").render(action=action.rstrip("\n"), **values)


