"""A pod on a lost node as Kubernetes leaves it (``contracts.pods``): Running, Ready False since
the node controller gave up on the node, its containers still running as far as the API knows.
Both planes read it: the runner for its executors, the controller for a driver pod."""

from __future__ import annotations

from typing import Any

from contracts.pods import (
    LOST_AFTER_SECONDS,
    lost_with_node,
    node_of,
    not_ready_since,
    parse_time,
    unschedulable,
)

SINCE = "2026-11-28T20:48:30Z"
T = parse_time(SINCE)
assert T is not None


def _pod(ready: str = "False", phase: str = "Running", terminated: bool = False,
         deleting: bool = False, containers_ready: str = "True",
         gates: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "wc-driver"}
    if deleting:
        meta["deletionTimestamp"] = SINCE  # a graceful delete the lost kubelet never confirms
    state = {"terminated": {"exitCode": 137}} if terminated else {"running": {}}
    spec: dict[str, Any] = {"nodeName": "kind-worker"}
    if gates:
        spec["readinessGates"] = [{"conditionType": "example.com/feature"}]
    return {"metadata": meta, "spec": spec,
            "status": {"phase": phase,
                       "conditions": [{"type": "Ready", "status": ready,
                                       "lastTransitionTime": SINCE},
                                      {"type": "ContainersReady", "status": containers_ready,
                                       "lastTransitionTime": "2026-11-28T20:40:00Z"}],
                       "containerStatuses": [{"name": "runner", "state": state}]}}


def test_a_running_pod_not_ready_is_lost_after_the_margin_even_while_being_deleted() -> None:
    assert not_ready_since(_pod()) == T
    assert not lost_with_node(_pod(), T + LOST_AFTER_SECONDS - 1)
    assert lost_with_node(_pod(), T + LOST_AFTER_SECONDS)
    assert lost_with_node(_pod(deleting=True), T + 60)
    assert node_of(_pod()) == "kind-worker" and node_of({}) == "unknown"


def test_a_ready_pending_starting_or_ended_pod_is_not_lost_with_its_node() -> None:
    """A readiness probe failing (the driver pod while its runner starts) is the kubelet's
    not-Ready: ContainersReady is False with it. Only the node controller leaves it True."""
    for pod in (_pod(ready="True"), _pod(phase="Pending"), _pod(phase="Failed"),
                _pod(terminated=True), _pod(containers_ready="False"), _pod(gates=True)):
        assert not_ready_since(pod) is None
        assert not lost_with_node(pod, T + 600)
    assert parse_time("yesterday") is None and parse_time(None) is None


def _pending(reason: str | None = "Unschedulable", status: str = "False",
             deleting: bool = False) -> dict[str, Any]:
    conditions = [] if reason is None else [
        {"type": "PodScheduled", "status": status, "reason": reason,
         "message": "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated "
                    "taint {node.kubernetes.io/unreachable: }"}]
    meta: dict[str, Any] = {"name": "wc-exec-4"}
    if deleting:
        meta["deletionTimestamp"] = SINCE
    return {"metadata": meta, "spec": {}, "status": {"phase": "Pending", "conditions": conditions}}


def test_a_pending_pod_no_node_has_room_for_is_unschedulable_and_no_other_is() -> None:
    assert unschedulable(_pending())
    assert not unschedulable(_pending(reason=None))  # not looked at by the scheduler yet
    assert not unschedulable(_pending(status="True", reason=None))  # bound, starting
    assert not unschedulable(_pending(reason="SchedulingGated"))  # held back, not refused
    assert not unschedulable(_pending(deleting=True))  # on its way out
    assert not unschedulable(_pod(ready="True"))  # running
