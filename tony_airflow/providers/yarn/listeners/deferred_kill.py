"""Kills the application of a deferred task that a user marks failed or succeeded.

Airflow calls a trigger's `on_kill` only once a triggerer runs it; a task marked in the moment between
deferring and its trigger's start would leave its application running. The API server fires these
listener hooks when a user sets a task's state (`previous_state` is None then), and the task instance
still names its trigger: its kwargs say which application, on which ResourceManager, with which
credentials, so the trigger's own `on_kill` ends it. A task running in a worker is not deferred (no
trigger) and is left to the operator's `on_kill`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from airflow.listeners import hookimpl

from tony_airflow.providers.yarn.triggers.yarn import YarnApplicationTrigger

log = logging.getLogger(__name__)
TRIGGER_CLASSPATH = f"{YarnApplicationTrigger.__module__}.{YarnApplicationTrigger.__qualname__}"
KILL_TIMEOUT_S = 30.0


def _stored_trigger(trigger_id: int) -> tuple[str, dict[str, Any]] | None:
    """(classpath, kwargs) of a trigger row, or None once the triggerer has cleaned it up."""
    from airflow.models.trigger import Trigger
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.get(Trigger, trigger_id)
        return None if row is None else (row.classpath, dict(row.kwargs))


def kill_deferred_application(task_instance: Any,
                              load: Callable[[int], tuple[str, dict[str, Any]] | None] | None = None) -> str | None:
    """Kill the application the task's YARN trigger watches; its id, or None when there is nothing to do."""
    trigger_id = getattr(task_instance, "trigger_id", None)
    if trigger_id is None:
        return None
    stored = (load or _stored_trigger)(trigger_id)
    if stored is None or stored[0] != TRIGGER_CLASSPATH:
        return None
    trigger = YarnApplicationTrigger(**stored[1])
    errors: list[BaseException] = []

    def kill() -> None:  # its own thread and loop: the caller may be inside the API server's loop
        try:
            asyncio.run(trigger.on_kill())
        except Exception as exc:  # noqa: BLE001 - reported below, never raised into Airflow's API call
            errors.append(exc)

    thread = threading.Thread(target=kill, name="yarn-deferred-kill", daemon=True)
    thread.start()
    thread.join(KILL_TIMEOUT_S)
    if errors or thread.is_alive():
        log.warning("could not kill %s of the deferred task %s: %s", trigger.application_id,
                    getattr(task_instance, "task_id", "?"), errors[0] if errors else "timed out")
        return None
    return trigger.application_id


@hookimpl
def on_task_instance_failed(previous_state: Any, task_instance: Any, error: Any) -> None:
    if previous_state is None:  # set by a user (API, UI), not by the task's own run
        kill_deferred_application(task_instance)


@hookimpl
def on_task_instance_success(previous_state: Any, task_instance: Any) -> None:
    if previous_state is None:
        kill_deferred_application(task_instance)
