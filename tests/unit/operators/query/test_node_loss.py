"""Executors lost with their node, read from their pods as Kubernetes leaves them when a node
stops reporting (``operators.query.node_loss``): Running, Ready False, the container not ended.
The pods here are the API's JSON with the fields the node controller sets; the sweeper's API
calls are the seam (the kind tier runs them against a real API server and a paused node)."""

from __future__ import annotations

from typing import Any

import pytest

from operators.query.node_loss import (
    LOST_AFTER_SECONDS,
    NodeLossError,
    NodeLossSweeper,
    lost_executors,
    without_room,
)

NOW = 1_700_000_100.0  # 2023-11-14T22:15:00Z
AGO_30 = "2023-11-14T22:14:30Z"
AGO_5 = "2023-11-14T22:14:55Z"


def _pod(name: str, exec_id: str, node: str, ready: str = "True", since: str = AGO_30,
         phase: str = "Running", terminated: bool = False, deleting: bool = False,
         role: str = "executor") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"spark-role": role, "spark-exec-id": exec_id}}
    if deleting:
        meta["deletionTimestamp"] = AGO_5
    state = {"terminated": {"exitCode": 1}} if terminated else {"running": {}}
    return {
        "metadata": meta,
        "spec": {"nodeName": node},
        "status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": since},
                           {"type": "ContainersReady", "status": "True",
                            "lastTransitionTime": AGO_30}],
            "containerStatuses": [{"name": "spark-kubernetes-executor", "state": state}],
        },
    }


def test_an_executor_not_ready_on_a_lost_node_is_lost_even_when_spark_already_deleted_it() -> None:
    pods = [
        _pod("wc-exec-1", "1", "worker", ready="True"),
        _pod("wc-exec-2", "2", "worker2", ready="False"),
        _pod("wc-exec-3", "3", "worker2", ready="False", deleting=True),  # never confirmed
    ]
    lost = lost_executors(pods, NOW)
    assert [(e.executor_id, e.pod, e.node) for e in lost] == [
        ("2", "wc-exec-2", "worker2"), ("3", "wc-exec-3", "worker2")]
    assert lost[0].not_ready_since == pytest.approx(NOW - 30)
    assert lost[0].to_dict()["notReadySince"] == lost[0].not_ready_since


@pytest.mark.parametrize("pod", [
    _pod("recent", "4", "w2", ready="False", since=AGO_5),      # not ready for 5 s only
    _pod("ended", "5", "w2", ready="False", terminated=True),   # Spark's lifecycle handles it
    _pod("pending", "6", "w2", ready="False", phase="Pending"), # not started yet
    _pod("driver", "7", "w2", ready="False", role="driver"),    # not an executor
    _pod("no-id", "", "w2", ready="False"),
], ids=lambda p: p["metadata"]["name"])
def test_what_is_not_a_loss(pod: dict[str, Any]) -> None:
    assert LOST_AFTER_SECONDS > 5
    assert lost_executors([pod], NOW) == []


def test_the_sweeper_removes_each_lost_pod_once_and_retries_a_failed_delete() -> None:
    pods = [_pod("wc-exec-2", "2", "worker2", ready="False")]
    deleted: list[str] = []
    fail = [True]

    def delete(name: str) -> None:
        if fail[0]:
            fail[0] = False
            raise OSError("connection refused")
        deleted.append(name)

    sweeper = NodeLossSweeper(lambda: pods, delete)
    (lost,) = sweeper.sweep(NOW)
    with pytest.raises(NodeLossError, match="deleting executor pod wc-exec-2 failed"):
        sweeper.remove(lost)
    assert sweeper.sweep(NOW) == [lost]  # not removed: found again
    sweeper.remove(lost)
    assert deleted == ["wc-exec-2"]
    assert sweeper.sweep(NOW) == []


def test_a_failed_list_is_a_clear_error() -> None:
    def boom() -> list[dict[str, Any]]:
        raise OSError("503 Service Unavailable")

    with pytest.raises(NodeLossError, match="listing the executor pods failed: 503"):
        NodeLossSweeper(boom, lambda _n: None).sweep(NOW)


def _unschedulable(name: str, role: str = "executor") -> dict[str, Any]:
    pod = _pod(name, name[-1], "", phase="Pending", role=role)
    pod["spec"] = {}
    pod["status"] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    return pod


def test_executors_no_node_has_room_for_are_counted_and_a_failed_list_counts_none() -> None:
    pods = [_pod("wc-exec-1", "1", "worker"), _unschedulable("wc-exec-3"),
            _unschedulable("wc-exec-4"), _unschedulable("wc-driver", role="driver")]
    assert without_room(pods) == 2
    assert NodeLossSweeper(lambda: pods, lambda _n: None).without_room() == 2

    def boom() -> list[dict[str, Any]]:
        raise OSError("503 Service Unavailable")

    # unknown: the start waits for every executor it asked for, as without this view
    assert NodeLossSweeper(boom, lambda _n: None).without_room() == 0
