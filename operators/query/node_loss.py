"""Executors lost with their node: found from their pods, removed so that Spark replaces them.

Usage (the runner's watch, every :data:`SWEEP_SECONDS`, on Kubernetes only)::

    sweeper = NodeLossSweeper.in_cluster(namespace, app_id)     # None off Kubernetes
    for lost in sweeper.sweep(now):                              # lost, not removed yet
        pool.kill([lost.executor_id])        # Spark drops it now; the target stays
        sweeper.remove(lost)                 # the pod force-deleted

Kubernetes says a node is lost by marking every pod on it not Ready once the node stops
reporting; the pod stays ``Running`` in the API. That is the signal read here
(:func:`contracts.pods.lost_with_node`): an executor pod ``Running`` whose ``Ready`` condition (not
``ContainersReady``: the kubelet sets both, the node controller only the first) has
been ``False`` for :data:`~contracts.pods.LOST_AFTER_SECONDS`. The driver's ServiceAccount reads
its own executor pods, not Nodes: the node is named from the pod.

Why the runner acts, and not only Spark: a graceful delete of a pod on a lost node never
completes (the kubelet that would confirm it is gone) and Spark counts a ``Running`` pod with a
deletion timestamp as running (``ExecutorPodsSnapshot``), so it neither replaces the executor
nor, until the heartbeat times out (``spark.network.timeout``, 120 s), gives up its tasks.
Measured on kind with a paused worker: Spark deleted the lost executors' pods after ~160 s and
never asked for replacements (docs/benchmark.md). Killing the executor in Spark reschedules
its tasks at once; the force delete (grace 0) lets the allocator see the pod gone and create
a replacement up to the unchanged target. A node that comes back finds its pods deleted and
its kubelet stops them; the driver ignores a removed executor's late results.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from contracts.pods import (
    LOST_AFTER_SECONDS,
    Pod,
    lost_with_node,
    node_of,
    not_ready_since,
    unschedulable,
)
from operators.errors import OperatorsError

SWEEP_SECONDS = 5.0
"""How often the runner lists its executor pods (one API call, a few pods)."""

APP_LABEL = "spark-app-selector"
ROLE_LABEL = "spark-role"
EXECUTOR_ID_LABEL = "spark-exec-id"
"""The labels Spark puts on every executor pod (``org.apache.spark.deploy.k8s.Constants``)."""


class NodeLossError(OperatorsError):
    """The executor pods could not be listed or deleted (the API server, the token)."""


@dataclass(frozen=True)
class LostExecutor:
    """One executor whose pod Kubernetes marked not Ready: its node stopped reporting."""

    executor_id: str
    pod: str
    node: str
    not_ready_since: float
    """Unix time of the pod's Ready condition turning False."""

    def to_dict(self) -> dict[str, Any]:
        return {"executorId": self.executor_id, "pod": self.pod, "node": self.node,
                "notReadySince": self.not_ready_since}


def lost_executors(pods: Iterable[Pod], now: float,
                   lost_after: float = LOST_AFTER_SECONDS) -> list[LostExecutor]:
    """The executors of ``pods`` (Kubernetes' JSON) lost with their node at ``now``
    (:func:`contracts.pods.lost_with_node`); one Spark already deleted gracefully still counts
    (``test_node_loss.py``)."""
    out: list[LostExecutor] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        executor_id = str(labels.get(EXECUTOR_ID_LABEL) or "")
        since = not_ready_since(pod)
        if labels.get(ROLE_LABEL) != "executor" or not executor_id or since is None:
            continue
        if lost_with_node(pod, now, lost_after):
            out.append(LostExecutor(executor_id, str(meta.get("name")), node_of(pod), since))
    return out


def without_room(pods: Iterable[Pod]) -> int:
    """How many of ``pods`` are executors the scheduler has found no node with room for
    (:func:`contracts.pods.unschedulable`): Spark keeps them asked for, and they run once a node
    has room (a lost node's back, another's pods gone), but nothing sooner will register them."""
    return sum(1 for pod in pods
               if ((pod.get("metadata") or {}).get("labels") or {}).get(ROLE_LABEL) == "executor"
               and unschedulable(pod))


class NodeLossSweeper:
    """Finds this application's executors lost with their node, each once, and removes their
    pods. ``list_pods`` and ``delete_pod`` are the API calls (the kubernetes client's, in the
    driver pod; a test's)."""

    def __init__(self, list_pods: Callable[[], list[Pod]],
                 delete_pod: Callable[[str], None]) -> None:
        self._list, self._delete = list_pods, delete_pod
        self._removed: set[str] = set()

    @classmethod
    def in_cluster(cls, namespace: str, app_id: str) -> NodeLossSweeper:
        """The sweeper of Spark application ``app_id``'s executors in ``namespace``, with the
        driver pod's ServiceAccount token (the one Spark creates executors with)."""
        from kubernetes import client, config

        config.load_incluster_config()  # type: ignore[no-untyped-call]
        core = client.CoreV1Api()
        selector = f"{APP_LABEL}={app_id},{ROLE_LABEL}=executor"

        def list_pods() -> list[Pod]:
            r: Any = core.list_namespaced_pod(namespace, label_selector=selector,
                                              _preload_content=False, _request_timeout=10)
            return list(json.loads(r.data).get("items") or [])

        def delete_pod(name: str) -> None:
            try:
                core.delete_namespaced_pod(name, namespace, grace_period_seconds=0,
                                           _request_timeout=10)
            except client.ApiException as e:
                if e.status != 404:  # already gone: what we wanted
                    raise

        return cls(list_pods, delete_pod)

    def sweep(self, now: float) -> list[LostExecutor]:
        """The executors found lost whose pods were not removed yet."""
        try:
            pods = self._list()
        except Exception as e:
            raise NodeLossError(f"listing the executor pods failed: {e}") from e
        return [e for e in lost_executors(pods, now) if e.pod not in self._removed]

    def without_room(self) -> int:
        """This application's executor pods the scheduler has no room for now
        (:func:`without_room`); 0 when they cannot be listed (then a start waits for every
        executor it asked for, as without this view)."""
        try:
            return without_room(self._list())
        except Exception:
            return 0

    def remove(self, lost: LostExecutor) -> None:
        """Force-delete the lost executor's pod (grace 0: see the module's docstring); a pod
        whose delete failed is found again by the next sweep."""
        try:
            self._delete(lost.pod)
        except Exception as e:
            raise NodeLossError(f"deleting executor pod {lost.pod} failed: {e}") from e
        self._removed.add(lost.pod)
