"""Every inotify instance a test's mirror opened is closed after the test: an instance is a per-user resource
(fs.inotify.max_user_instances, 128 by default), shared with every executor of the end-to-end tests running as
the same user; a leaked one would push those onto the quiet rule's fallback."""

from __future__ import annotations

import pytest

from tony_airflow.core.executor.output_events import EventSource


@pytest.fixture(autouse=True)
def _close_event_sources(monkeypatch):
    opened: list[EventSource] = []
    original = EventSource.open

    def tracked(self):
        opened.append(self)
        return original(self)

    monkeypatch.setattr(EventSource, "open", tracked)
    yield
    for source in opened:
        source.close()
