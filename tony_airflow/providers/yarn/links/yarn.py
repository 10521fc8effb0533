"""Extra links on a training task: "YARN application" and "TensorBoard", each leading to its own try's job.

Airflow 3's UI reads a link from the XCom under the link's `xcom_key`. The
operator writes it at submit time (`persist`), so both buttons work while the
job runs; at the end of the task Airflow recomputes it through `get_link`.

An XCom belongs to the task instance, not to one try, and a new try starts by
clearing them: read by key alone, try 1's link would lead to try 2's
application (or nowhere). So the operator also keeps one record per try,
`links_by_try` (`{"1": {application_id, tracking_url, tensorboard_url}, ...}`),
carried from try to try in the task state store (which survives the clearing)
and pushed again by every try. The provider's plugin registers these link
classes for the operator, so the API server asks `get_link` with the try the
user looks at (`ti_key.try_number`) instead of Airflow's plain XCom lookup.
An empty URL hides the button.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk.types import TaskInstanceKey

TRACKING_URL_KEY = "tracking_url"
TENSORBOARD_URL_KEY = "tensorboard_url"
APPLICATION_ID_KEY = "application_id"
FINAL_STATUS_KEY = "final_status"
LINKS_BY_TRY_KEY = "links_by_try"  # XCom and task state store: {try number: {application_id, tracking_url, ...}}


def _in_task_process() -> bool:
    """Inside a task (a worker's task runner) XComs come through the supervisor; elsewhere (the API
    server) from the metadata database."""
    runner = sys.modules.get("airflow.sdk.execution_time.task_runner")
    return getattr(runner, "SUPERVISOR_COMMS", None) is not None


def read_xcom(ti_key: TaskInstanceKey, key: str) -> Any:
    """The value of one XCom of the task instance, as the process asking can read it (None if absent)."""
    if _in_task_process():
        from airflow.sdk.execution_time.xcom import XCom

        return XCom.get_value(ti_key=ti_key, key=key)
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.execute(XComModel.get_many(
            key=key, run_id=ti_key.run_id, dag_ids=ti_key.dag_id, task_ids=ti_key.task_id,
            map_indexes=ti_key.map_index).with_only_columns(XComModel.value)).first()
    if row is None:
        return None
    try:
        return json.loads(row.value)
    except (TypeError, ValueError):
        return row.value


def try_link(by_try: Any, try_number: int | None, url_key: str) -> str | None:
    """The URL of one try from a `links_by_try` record: None when there is no record to go by (read the
    plain XCom then), "" when that try started no application."""
    if not isinstance(by_try, Mapping) or try_number is None:
        return None
    entry = by_try.get(str(try_number))
    return str(entry.get(url_key) or "") if isinstance(entry, Mapping) else ""


class _XComUrlLink(BaseOperatorLink):
    url_key: str = ""

    def get_link(self, operator: Any, *, ti_key: TaskInstanceKey) -> str:
        url = try_link(read_xcom(ti_key, LINKS_BY_TRY_KEY), getattr(ti_key, "try_number", None), self.url_key)
        return url if url is not None else (read_xcom(ti_key, self.url_key) or "")

    @classmethod
    def persist(cls, context: Any, url: str) -> None:
        """Write the link's own XCom now, so the UI shows it before the task ends."""
        context["ti"].xcom_push(key=cls().xcom_key, value=url or "")


def record_try(context: Any, application_id: str, tracking_url: str, tensorboard_url: str) -> dict[str, Any]:
    """Add this try's application and URLs to `links_by_try` (the state store's copy, then the XCom)."""
    ti = context["ti"]
    try_number = getattr(ti, "try_number", None)
    store = context.get("task_state_store")
    by_try: dict[str, Any] = {}
    if store is not None:
        try:
            earlier = store.get(LINKS_BY_TRY_KEY)
        except Exception:  # a link is a help: never the task's outcome
            earlier = None
        if isinstance(earlier, Mapping):
            by_try.update(earlier)
    if try_number is None:
        return by_try
    by_try[str(try_number)] = {APPLICATION_ID_KEY: application_id, TRACKING_URL_KEY: tracking_url,
                               TENSORBOARD_URL_KEY: tensorboard_url}
    if store is not None:
        try:
            store.set(LINKS_BY_TRY_KEY, by_try)
        except Exception:
            pass
    ti.xcom_push(key=LINKS_BY_TRY_KEY, value=by_try)
    return by_try


class YarnApplicationLink(_XComUrlLink):
    """The application's tracking URL: the AM's web UI behind the ResourceManager's proxy."""

    name = "YARN application"
    url_key = TRACKING_URL_KEY


class TensorBoardLink(_XComUrlLink):
    """TensorBoard, served by the AM as a page of the tracking URL (empty when the job has none)."""

    name = "TensorBoard"
    url_key = TENSORBOARD_URL_KEY
