"""One ResourceManager poll for all the triggers of a triggerer that watch the same cluster.

Hundreds of deferred training tasks would otherwise cost the RM one request per
task per interval. Here the triggers of one event loop that name the same RM
(and credentials) subscribe to one `SharedPoller`: each round is one
`/ws/v1/cluster/apps?states=<active>` request for all of them, plus one
`/apps/<id>` request for a watched application that left the active list (it
ended: its final status and diagnostics). The poller lives while it has
subscribers; each trigger keeps its own `on_kill` and error count.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Hashable
from dataclasses import dataclass, field

from tony_airflow.yarn.rest import ACTIVE_STATES, ApplicationReport, AsyncResourceManagerClient

Outcome = ApplicationReport | BaseException


@dataclass(eq=False)
class Subscription:
    application_id: str
    interval: float
    queue: asyncio.Queue[Outcome] = field(default_factory=lambda: asyncio.Queue(maxsize=1))

    def deliver(self, outcome: Outcome) -> None:
        """Keep only the newest outcome: a slow reader skips rounds, it never piles them up."""
        if self.queue.full():
            self.queue.get_nowait()
        self.queue.put_nowait(outcome)


class SharedPoller:
    """Polls one ResourceManager for every subscribed application id, once per round."""

    def __init__(self, client: AsyncResourceManagerClient, on_idle: Callable[[], None]):
        self.client = client
        client.keep_open()
        self.subscriptions: list[Subscription] = []
        self.requests = 0        # RM requests made (benchmarks and tests count them)
        self.rounds = 0
        self._on_idle = on_idle
        self._task: asyncio.Task | None = None
        self._wake = asyncio.Event()

    def subscribe(self, application_id: str, interval: float) -> Subscription:
        sub = Subscription(application_id, max(0.1, float(interval)))
        self.subscriptions.append(sub)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        self._wake.set()  # a newcomer gets its first answer now, not after a whole interval
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        if sub in self.subscriptions:
            self.subscriptions.remove(sub)
        if not self.subscriptions:
            self._on_idle()
            if self._task is not None and self._task is not asyncio.current_task():
                self._task.cancel()

    async def _run(self) -> None:
        try:
            while self.subscriptions:
                await self.poll_once()
                interval = min((s.interval for s in self.subscriptions), default=0.0)
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), interval)
        finally:
            await self.client.aclose()

    async def poll_once(self) -> None:
        """One round: the active list, then each watched id that is not in it."""
        subs = list(self.subscriptions)
        if not subs:
            return
        self.rounds += 1
        try:
            self.requests += 1
            active = {r.id: r for r in await self.client.applications(states=ACTIVE_STATES)}
        except Exception as exc:
            for sub in subs:
                sub.deliver(exc)
            return
        gone = sorted({s.application_id for s in subs} - set(active))
        self.requests += len(gone)  # each ended (or unknown) application: its own report, once per round
        reports = await asyncio.gather(*(self.client.application(a) for a in gone), return_exceptions=True)
        ended: dict[str, Outcome] = dict(zip(gone, reports, strict=True))
        for sub in subs:
            sub.deliver(active.get(sub.application_id) or ended[sub.application_id])


_POLLERS: dict[tuple[int, Hashable], SharedPoller] = {}


@contextlib.asynccontextmanager
async def watching(key: Hashable, make_client: Callable[[], AsyncResourceManagerClient], application_id: str,
                   interval: float) -> AsyncIterator[Subscription]:
    """Subscribe to the poller of this event loop and `key` (the RM addresses and credentials)."""
    full_key = (id(asyncio.get_running_loop()), key)
    poller = _POLLERS.get(full_key)
    if poller is None:
        def forget() -> None:
            _POLLERS.pop(full_key, None)
        poller = _POLLERS[full_key] = SharedPoller(make_client(), forget)
    sub = poller.subscribe(application_id, interval)
    try:
        yield sub
    finally:
        poller.unsubscribe(sub)


def poller_of(key: Hashable) -> SharedPoller | None:
    """The running poller for `key` in this event loop, if any (tests and benchmarks)."""
    return _POLLERS.get((id(asyncio.get_running_loop()), key))
