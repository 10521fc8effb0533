"""A task-instance context for calling an operator's execute() outside Airflow's task runner."""

from __future__ import annotations

from typing import Any


class FakeTI:
    """Records XCom pushes in order."""

    def __init__(self, run_id: str = "manual__2026-11-21T06:00:00+00:00") -> None:
        self.xcoms: dict[str, Any] = {}
        self.pushes: list[str] = []
        self.dag_id, self.task_id, self.run_id = "dag", "train", run_id
        self.stats_tags: dict[str, str] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value
        self.pushes.append(key)


class DictStore:
    """Airflow 3.3's task_state_store (what survives a worker crash between tries), in memory."""

    def __init__(self, **values: Any) -> None:
        self.values = dict(values)

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def set(self, key: str, value: Any, **_: Any) -> None:
        self.values[key] = value


def task_context(store: DictStore | None = None, run_id: str = "manual__2026-11-21T06:00:00+00:00") -> dict[str, Any]:
    ti = FakeTI(run_id)
    return {"ti": ti, "run_id": ti.run_id, "task_state_store": store if store is not None else DictStore()}
