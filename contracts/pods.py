"""A pod on a lost node, as Kubernetes says it: both planes read it the same way.

When a node stops reporting, the node controller marks every pod on it not Ready (after its
``node-monitor-grace-period``, 40 s by default) and leaves it ``Running`` in the API; a delete of
such a pod never completes, because the kubelet that would confirm it is gone. It sets the
``Ready`` condition only: ``ContainersReady`` stays ``True`` (measured on kind with a paused
node). The kubelet sets both together -- a readiness probe failing (the driver pod's, while it
starts) turns both ``False`` -- so ``Ready`` False beside ``ContainersReady`` True, on a pod with
no readiness gates, is the node controller's word. The runner reads
this of its executors (``operators/query/node_loss.py``), the controller of a driver pod
(``controller/kube/reconciler.py``). Standard library only; pods are the API's JSON.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

LOST_AFTER_SECONDS = 10.0
"""How long a running pod stays not Ready before it counts as lost with its node, on top of the
node controller's own grace period: a pod flapping with its node's heartbeat is not a loss."""

Pod = Mapping[str, Any]


def parse_time(value: object) -> float | None:
    """Unix time of an API timestamp (``2026-01-01T00:00:00Z``); None if it is not one."""
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def not_ready_since(pod: Pod) -> float | None:
    """When the node controller turned a running pod not Ready (Unix time), or None: ``Ready``
    False while ``ContainersReady`` stays True, no readiness gates, no container ended (one that
    ended is its owner's to handle: Spark's lifecycle, the controller's restart). A pod already
    being deleted still counts: on a lost node that delete never ends
    (``tests/unit/contracts/test_pods.py``)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or (pod.get("spec") or {}).get("readinessGates"):
        return None
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    ready = conditions.get("Ready")
    if ready is None or ready.get("status") != "False":
        return None
    if (conditions.get("ContainersReady") or {}).get("status") != "True":
        return None  # the kubelet's own not-Ready: a probe failing, a container starting
    if any((cs.get("state") or {}).get("terminated")
           for cs in status.get("containerStatuses") or []):
        return None
    return parse_time(ready.get("lastTransitionTime"))


def lost_with_node(pod: Pod, now: float, lost_after: float = LOST_AFTER_SECONDS) -> bool:
    """The pod has been not Ready on a running phase for ``lost_after`` seconds at ``now``."""
    since = not_ready_since(pod)
    return since is not None and now - since >= lost_after


def node_of(pod: Pod) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "unknown")


def unschedulable(pod: Pod) -> bool:
    """The scheduler found no node with room for the pod: ``Pending`` with its ``PodScheduled``
    condition ``False`` for the reason ``Unschedulable`` (what it sets when no node fits the
    requests; the pod waits until one does). A pod not yet looked at, or bound to a node and
    starting, is not (``tests/unit/contracts/test_pods.py``)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Pending" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               and c.get("reason") == "Unschedulable" for c in status.get("conditions") or [])
