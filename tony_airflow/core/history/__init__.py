"""Job history: the AM's JSON-lines event log, what is read back from it, and how it is shown.

The AM writes (events.EventLog into store.HistoryStore); `tony history`, the
history web UI and the AM's live status page all read the same events through
model.JobHistory and render them with the same templates (render.py).
"""
