"""The CapacityScheduler's queue tree, as the RM's REST answer (`/ws/v1/cluster/scheduler`) gives it."""

from __future__ import annotations

from typing import Any


def scheduler_info(answer: dict[str, Any]) -> dict[str, Any]:
    """The root of the tree in the RM's answer."""
    return answer["scheduler"]["schedulerInfo"]


def find_queue(node: dict[str, Any], name: str) -> dict[str, Any] | None:
    """A queue under `node` by its short name or its path (`default`, `root.default`)."""
    for queue in ((node.get("queues") or {}).get("queue") or []):
        if queue.get("queueName") == name or queue.get("queuePath") == name:
            return queue
        found = find_queue(queue, name)
        if found is not None:
            return found
    return None


def leaf_queues(node: dict[str, Any]) -> list[str]:
    """The short names of the queues applications can be submitted to."""
    leaves = []
    for queue in ((node.get("queues") or {}).get("queue") or []):
        children = leaf_queues(queue)
        leaves.extend(children or [queue.get("queueName", "")])
    return leaves
