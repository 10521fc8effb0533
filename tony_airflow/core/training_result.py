"""How far a job's training got and its final metrics, once the job has ended: what the front ends hand on
to the steps after it (Airflow's XCom and OpenLineage facet, Azkaban's output properties).

The source is the job's history: the AM records a TRAINING event at most every 10 s and the last one before
JOB_FINISHED, so the history holds the final numbers also when the job ended between two of a client's
polls (a client's last look at the AM's page is older). A job whose program never reported has none.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

TRAINING_EVENT = "TRAINING"  # core/history/events.py's name (h-52core's AM writes it)
FIELDS = ("task", "step", "total_steps", "epoch", "total_epochs", "percent", "metrics", "source", "updated")
MAX_METRIC_PROPERTIES = 16  # Oozie keeps at most 2 KB of an action's data; a few metrics fit beside the URLs
_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def last_training(events: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The newest TRAINING event of the job's last attempt that reported (its fields as in the AM's
    `training` dict), or None."""
    last: dict[str, Any] | None = None
    for event in events:
        if event.get("event") == TRAINING_EVENT:
            last = {k: event.get(k) for k in FIELDS if k in event}
            if "attempt" in event:
                last["attempt"] = event["attempt"]
    return last


def final_training(application_id: str, training: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The final numbers with the application that produced them (the operator's XCom `training`)."""
    if not training:
        return None
    return {"application_id": application_id, **{k: training.get(k) for k in FIELDS if k != "updated"},
            "metrics": dict(training.get("metrics") or {})}


def _text(value: Any) -> str:
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    return str(value)


def output_properties(training: Mapping[str, Any] | None) -> dict[str, str]:
    """Flat string properties (Azkaban's output properties, Oozie's action data): `training_step`,
    `training_total_steps`, `training_epoch`, `training_total_epochs`, `training_percent` and
    `metric_<name>` for the first MAX_METRIC_PROPERTIES metrics by name. Empty without a report."""
    if not training:
        return {}
    props = {f"training_{k}": _text(training[k]) for k in ("step", "total_steps", "epoch", "total_epochs", "percent")
             if training.get(k) is not None}
    metrics = training.get("metrics") or {}
    if isinstance(metrics, Mapping):
        for name in sorted(metrics)[:MAX_METRIC_PROPERTIES]:
            props[f"metric_{_NAME.sub('_', str(name))[:64]}"] = _text(metrics[name])
    return props


def read_final_training(app_id: str, store: Any) -> dict[str, Any] | None:
    """The last TRAINING event of `app_id` in a history store (core/history/store.py), None when the job
    has no history or its program never reported. Never raises: the numbers are a help, not the outcome."""
    from tony_airflow.core.history import reader

    try:
        history = reader.load_by_id(store, app_id, with_spec=False)
    except Exception:
        return None
    return last_training(history.events) if history is not None else None
