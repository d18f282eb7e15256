"""The controller names the node whose executors were lost in one Warning Event at the first
pass that reads the loss in the runner's ``/status`` ``lostExecutors``
(``Reconciler._loss_event``), whatever the engine decided on it, once per lost executor. The
API client is a stand-in (KubeApi is a seam we own); the kind tier's lost-worker story reads
the same Event from a real API server."""

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


KEY = ("jobs", "wc")


def test_the_lost_node_is_named_once_at_the_first_pass_that_reads_the_loss() -> None:
    api = Events()
    r = _reconciler(api)
    r._loss_event(KEY, copy.deepcopy(JOB), DECISION, LOST, since=870.0)
    ((type_, reason, message),) = api.events
    assert (type_, reason) == ("Warning", "ExecutorsLost")
    assert message.startswith("node kind-worker2 lost: executor(s) 3, 4 removed by the runner")
    assert "kind-worker:" not in message and "2 -> 4 executors" in message

    settled = copy.deepcopy(JOB)
    settled["status"]["lastDecision"]["reason"] = "ExecutorsLost"  # the next passes
    r._loss_event(KEY, settled, DECISION, LOST, since=870.0)
    hold = DECISION.model_copy(update={"reason": Reason.WITHIN_BAND, "message": "hold"})
    r._loss_event(KEY, settled, hold, LOST, since=880.0)
    assert len(api.events) == 1


def test_a_loss_is_named_when_another_step_decides_or_status_was_down_first() -> None:
    api = Events()
    r = _reconciler(api)
    out = DECISION.model_copy(update={"reason": Reason.SCALE_OUT,
                                      "message": "scale out 2 -> 4 executors"})
    r._loss_event(KEY, copy.deepcopy(JOB), out, None, since=870.0)  # /status down: nothing yet
    assert api.events == []
    r._loss_event(KEY, copy.deepcopy(JOB), out, LOST, since=870.0)
    ((_, reason, message),) = api.events
    assert reason == "ExecutorsLost"
    assert message == ("node kind-worker2 lost: executor(s) 3, 4 removed by the runner. "
                       "ScaleOut: scale out 2 -> 4 executors")
    # a later loss on the same job: only the new executor is named
    later = RunnerStatus.model_validate({"lostExecutors": [
        *LOST.model_dump(by_alias=True)["lostExecutors"],
        {"executorId": "7", "pod": "wc-exec-7", "node": "kind-worker", "notReadySince": 990.0,
         "removedAt": 1001.0}]})
    r._loss_event(KEY, copy.deepcopy(JOB), DECISION, later, since=900.0)
    assert len(api.events) == 2 and api.events[1][2].startswith(
        "node kind-worker lost: executor(s) 7 removed by the runner")


def test_no_event_without_a_loss_the_runner_reports() -> None:
    api = Events()
    r = _reconciler(api)
    r._loss_event(KEY, copy.deepcopy(JOB), DECISION, None, since=870.0)
    r._loss_event(KEY, copy.deepcopy(JOB), DECISION, RunnerStatus(), since=870.0)
    r._loss_event(KEY, copy.deepcopy(JOB), DECISION, LOST, since=1000.0)  # all settled
    assert api.events == []
