"""Extra links on a training task: "YARN application" and "TensorBoard".

Airflow 3's UI reads a link from the XCom under the link's `xcom_key`. The
operator writes it at submit time (`persist`), so both buttons work while the
job runs; at the end of the task Airflow recomputes it through `get_link`,
which reads the URL XComs the operator pushed. An empty URL hides the button.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperatorLink
from airflow.sdk.execution_time.xcom import XCom

if TYPE_CHECKING:
    from airflow.sdk.types import TaskInstanceKey

TRACKING_URL_KEY = "tracking_url"
TENSORBOARD_URL_KEY = "tensorboard_url"
APPLICATION_ID_KEY = "application_id"
FINAL_STATUS_KEY = "final_status"


class _XComUrlLink(BaseOperatorLink):
    url_key: str = ""

    def get_link(self, operator: Any, *, ti_key: TaskInstanceKey) -> str:
        return XCom.get_value(ti_key=ti_key, key=self.url_key) or ""

    @classmethod
    def persist(cls, context: Any, url: str) -> None:
        """Write the link's own XCom now, so the UI shows it before the task ends."""
        context["ti"].xcom_push(key=cls().xcom_key, value=url or "")


class YarnApplicationLink(_XComUrlLink):
    """The application's tracking URL: the AM's web UI behind the ResourceManager's proxy."""

    name = "YARN application"
    url_key = TRACKING_URL_KEY


class TensorBoardLink(_XComUrlLink):
    """TensorBoard, served by the AM as a page of the tracking URL (empty when the job has none)."""

    name = "TensorBoard"
    url_key = TENSORBOARD_URL_KEY
