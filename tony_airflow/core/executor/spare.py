"""An elastic job's spare (`--spares N`, core/am/spares.py): its executor waits for a lost worker's place.

A spare's container starts like a worker's and its executor has imported its modules; instead of registering
as a task it asks the AM (POST /v1/spare, a long poll) until it is told the index of the worker it becomes,
then goes on as that worker (registers into the running attempt, runs the command). Told to stop (the attempt
is over), refused, or the AM silent past the job's heartbeat timeout: it ends without running anything.
"""

from __future__ import annotations

import http.client
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from tony_airflow.core import protocol

log = logging.getLogger("tony.executor")


class Calls(Protocol):
    """The executor's RegistryClient, as far as a spare uses it."""

    def call(self, method: str, path: str, payload: dict | None = None, retries: int = 5,
             timeout: float | None = None) -> dict[str, Any]: ...


SPARE_WAIT_S = 20.0  # one long poll (the AM answers at once when the spare is told its place)


def wait_for_place(registry: Calls, env: Mapping[str, str], host: str, give_up_s: float,
                   clock: Callable[[], float] = time.monotonic, pause: Callable[[float], None] = time.sleep) -> int | None:
    """The index of the worker this spare becomes, or None: it ends without a command."""
    spare = env[protocol.ENV_SPARE]
    payload = {"spare": spare, "attempt": int(env[protocol.ENV_ATTEMPT]), "host": host,
               "container_id": env.get("CONTAINER_ID", "")}
    last_answer = clock()
    said = False
    while True:
        try:
            answer = registry.call("POST", f"{protocol.SPARE}?wait={SPARE_WAIT_S:g}", payload, retries=2)
        except (OSError, http.client.HTTPException) as exc:
            if clock() - last_answer > give_up_s:
                log.error("%s: the AM has not answered for %.0fs (last error: %s): ending", spare,
                          clock() - last_answer, exc)
                return None
            pause(1.0)
            continue
        except RuntimeError as exc:  # RefusedByAM: the AM does not hold this spare
            log.info("%s: the AM does not want this spare: %s", spare, exc)
            return None
        last_answer = clock()
        state = answer.get("state")
        if state == "take":
            log.info("%s takes the place of worker:%s", spare, answer.get("index"))
            return int(answer["index"])
        if state != "wait":
            log.info("%s: the AM ended the attempt: this spare was not needed", spare)
            return None
        if not said:
            log.info("%s waits for a lost worker's place", spare)
            said = True
