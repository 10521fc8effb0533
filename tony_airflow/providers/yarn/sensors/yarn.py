"""`YarnApplicationSensor`: wait for any YARN application (ours or not) to end.

Succeeds on SUCCEEDED; FAILED or KILLED fail the task at once, without retry,
with YARN's diagnostics. Works in poke, reschedule and deferrable modes.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from functools import cached_property
from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk import conf as airflow_conf
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from tony_airflow.core.presentation import failure_line
from tony_airflow.providers.yarn.hooks.yarn import YarnHook
from tony_airflow.providers.yarn.triggers.yarn import YarnApplicationTrigger
from tony_airflow.yarn.rest import ApplicationReport, is_application_id


def _failure(app_id: str, final_status: str, diagnostics: str) -> AirflowFailException:
    return AirflowFailException(failure_line(app_id, final_status, (diagnostics or "").strip() or
                                             "no diagnostics from YARN"))


class YarnApplicationSensor(BaseSensorOperator):
    """Wait until ``application_id`` (templated) is FINISHED/SUCCEEDED; fail fast on FAILED or KILLED."""

    template_fields: Sequence[str] = ("application_id",)
    ui_color = "#ffd8a0"

    def __init__(self, *, application_id: str, yarn_conn_id: str = YarnHook.default_conn_name,
                 deferrable: bool = airflow_conf.getboolean("operators", "default_deferrable", fallback=False),
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.application_id = application_id
        self.yarn_conn_id = yarn_conn_id
        self.deferrable = deferrable

    @cached_property
    def hook(self) -> YarnHook:
        return YarnHook(yarn_conn_id=self.yarn_conn_id)

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        if not self.poke(context):  # one look first: an application that already ended needs no trigger
            poke = self.poke_interval.total_seconds() if isinstance(self.poke_interval, timedelta) else self.poke_interval
            timeout = timedelta(seconds=self.timeout) if self.timeout else None
            # a sensor does not own the application: killing the sensor leaves it running
            trigger = YarnApplicationTrigger.for_settings(self.hook.settings, self.application_id, poke,
                                                          kill_on_task_kill=False)
            self.defer(trigger=trigger,
                       method_name="execute_complete", timeout=timeout)
        return self.application_id

    def poke(self, context: Any) -> PokeReturnValue | bool:
        if not is_application_id(self.application_id):
            raise AirflowFailException(f"application_id: {self.application_id!r} is not a YARN application id; "
                                       "allowed: application_<clusterTimestamp>_<sequence>")
        report: ApplicationReport = self.hook.application_report(self.application_id)
        self.log.info("%s %s %s", report.id, report.state, report.final_status)
        if not report.is_terminal:
            return False
        if report.final_status == "SUCCEEDED":
            return PokeReturnValue(is_done=True, xcom_value=report.id)  # the id is the sensor's XCom
        raise _failure(report.id, report.final_status, report.diagnostics)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> str:
        if event.get("status") == "error":
            raise AirflowException(event.get("message") or "the trigger failed")
        if event.get("status") != "success":
            raise _failure(event["application_id"], event["final_status"], event.get("diagnostics", ""))
        self.log.info("%s SUCCEEDED", event["application_id"])
        return event["application_id"]
