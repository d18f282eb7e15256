"""The controller names the node whose executors were lost in one Warning Event, when the
engine first decides on the loss (``Reconciler._loss_event``); the runner's ``/status``
``lostExecutors`` says which. The API client is a stand-in (KubeApi is a seam we own); the
kind tier's lost-worker story reads the same Event from a real API server."""

from __future__ import annotations

import copy
from typing import Any

from contracts.runner_api import RunnerStatus
from controller.core import Action, Decision, Reason
from controller.kube.controller_metrics import ControllerMetrics
from controller.kube.reconciler import Reconciler
from controller.kube.settings import ControllerSettings

JOB: dict[str, Any] = {"metadata": {"name": "wc", "namespace": "jobs", "uid": "u"},
                       "status": {"lastDecision": {"reason": "WithinBand"}}}
LOST = RunnerStatus.model_validate({"lostExecutors": [
    {"executorId": "3", "pod": "wc-exec-3", "node": "kind-worker2", "notReadySince": 940.0,
     "removedAt": 951.0},
    {"executorId": "4", "pod": "wc-exec-4", "node": "kind-worker2", "notReadySince": 940.0,
     "removedAt": 951.5},
    {"executorId": "1", "pod": "wc-exec-1", "node": "kind-worker", "notReadySince": 100.0,
     "removedAt": 110.0},  # an old loss, long settled
]})
DECISION = Decision(action=Action.SCALE, reason=Reason.EXECUTORS_LOST, target_executors=4,
                    message="2 executor(s) lost with their node 9 s ago: 2 -> 4 executors")


class Events:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: dict[str, Any], type_: str, reason: str, message: str,
              action: str = "") -> None:
        self.events.append((type_, reason, message))


def _reconciler(api: Events) -> Reconciler:
    return Reconciler(api, ControllerSettings(), lambda k: None, lambda k: None,  # type: ignore[arg-type]
                      lambda k, t: None, ControllerMetrics())  # type: ignore[arg-type,return-value]


def test_the_lost_node_is_named_once_when_the_engine_first_decides_on_it() -> None:
    api = Events()
    r = _reconciler(api)
    r._loss_event(copy.deepcopy(JOB), DECISION, LOST, since=870.0)
    ((type_, reason, message),) = api.events
    assert (type_, reason) == ("Warning", "ExecutorsLost")
    assert message.startswith("node kind-worker2 lost: executor(s) 3, 4 removed by the runner")
    assert "kind-worker:" not in message and "2 -> 4 executors" in message

    settled = copy.deepcopy(JOB)
    settled["status"]["lastDecision"]["reason"] = "ExecutorsLost"  # the next pass
    r._loss_event(settled, DECISION, LOST, since=870.0)
    assert len(api.events) == 1


def test_no_event_without_a_loss_the_runner_reports() -> None:
    api = Events()
    r = _reconciler(api)
    r._loss_event(copy.deepcopy(JOB), DECISION, None, since=870.0)
    r._loss_event(copy.deepcopy(JOB), DECISION, RunnerStatus(), since=870.0)
    hold = DECISION.model_copy(update={"reason": Reason.WITHIN_BAND})
    r._loss_event(copy.deepcopy(JOB), hold, LOST, since=870.0)
    assert api.events == []
