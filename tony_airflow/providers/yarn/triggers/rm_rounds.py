"""The ResourceManager poll that Airflow's triggerer shares between the triggers watching one cluster.

Hundreds of deferred training tasks would otherwise cost the RM one request per task per
interval. Airflow 3.3's shared streams (`BaseEventTrigger.shared_stream_key`,
`open_shared_stream`, `filter_shared_stream`) run one poll per group of triggers with equal
keys and hand each round to all of them; this module is that poll. A round is two requests,
whatever the number of triggers: this project's applications (its tag, and the user when the
connection names one) that are active, and those that ended since shortly before the last
round. A trigger whose application is not in a round (another tool's application, or one that
ended long ago) asks for its own report.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field

from tony_airflow.yarn.rest import ACTIVE_STATES, TERMINAL_STATES, ApplicationReport, AsyncResourceManagerClient

ENDED_MARGIN_S = 60.0  # a round also lists what ended this long before the previous one (clock skew, slow rounds)


@dataclass(frozen=True)
class Round:
    """One poll: when it began, the applications it saw (by id), or why it saw none."""

    at: float
    reports: dict[str, ApplicationReport] = field(default_factory=dict)
    error: str = ""
    unanswered: bool = False  # the error: no RM answered as the active one (down, or electing one)


async def poll_once(client: AsyncResourceManagerClient, since: float, tags: Sequence[str],
                    user: str | None) -> dict[str, ApplicationReport]:
    active = await client.applications(states=ACTIVE_STATES, tags=tags, user=user)
    ended = await client.applications(states=sorted(TERMINAL_STATES), tags=tags, user=user,
                                      finished_since_ms=int((since - ENDED_MARGIN_S) * 1000))
    return {r.id: r for r in [*active, *ended]}  # one that ended between the two requests: its end


async def rounds(client: AsyncResourceManagerClient, interval: float, tags: Sequence[str],
                 user: str | None = None) -> AsyncGenerator[Round, None]:
    """A round every `interval` seconds, for ever (Airflow's contract for a shared stream); an RM that does
    not answer makes a round with its error, never the end of the stream."""
    client.keep_open()
    previous = time.time()
    try:
        while True:
            began = time.time()
            try:
                found = Round(began, await poll_once(client, previous, tags, user))
            except Exception as exc:
                found = Round(began, error=" ".join(str(exc).split())[:500] or type(exc).__name__,
                              unanswered=bool(getattr(exc, "unanswered", False)))
            else:
                previous = began
            yield found
            await asyncio.sleep(max(0.0, interval - (time.time() - began)))
    finally:
        await client.aclose()
