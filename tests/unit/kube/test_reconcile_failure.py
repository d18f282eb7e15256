"""A reconcile pass that raises leaves a trace a person sees (issue #15 item 2): Degraded
``ReconcileFailed`` in status and one Event when it starts, not only a log line and a backoff.
The API client is a stand-in (KubeApi is a seam we own); the real API server path of the same
writes is covered by tests/integration/k8s."""

from __future__ import annotations

import copy
from typing import Any

from controller.kube.controller_metrics import ControllerMetrics
from controller.kube.reconciler import Reconciler
from controller.kube.settings import ControllerSettings

KEY = ("jobs", "wc")
JOB: dict[str, Any] = {"apiVersion": "stream-autoscaler.io/v1alpha1", "kind": "StreamJob",
                       "metadata": {"name": "wc", "namespace": "jobs", "generation": 2,
                                    "resourceVersion": "7", "uid": "u"},
                       "spec": {}, "status": {}}


class StandInApi:
    def __init__(self) -> None:
        self.status: dict[str, Any] = {}
        self.events: list[tuple[str, str, str]] = []

    def replace_status(self, obj: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        self.status = copy.deepcopy(body)
        return {**obj, "status": self.status}

    def event(self, obj: dict[str, Any], type_: str, reason: str, message: str,
              action: str = "") -> None:
        self.events.append((type_, reason, message))


def test_a_failed_pass_sets_degraded_and_one_event() -> None:
    api, job = StandInApi(), copy.deepcopy(JOB)
    r = Reconciler(api, ControllerSettings(), lambda k: job, lambda k: None,  # type: ignore[arg-type]
                   lambda k, t: None, ControllerMetrics(), clock=lambda: 1_000.0)  # type: ignore[arg-type,return-value]
    r.report_failure(KEY, OverflowError("cannot convert float infinity to integer"))
    degraded = next(c for c in api.status["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ReconcileFailed")
    assert "OverflowError: cannot convert float infinity" in degraded["message"]
    assert api.status["phase"] == "Degraded"
    job["status"] = api.status  # the next pass sees what was written
    r.report_failure(KEY, OverflowError("cannot convert float infinity to integer"))
    assert [e[1] for e in api.events] == ["ReconcileFailed"]  # once, when it starts


def test_a_job_gone_meanwhile_is_left_alone() -> None:
    api = StandInApi()
    r = Reconciler(api, ControllerSettings(), lambda k: None, lambda k: None,  # type: ignore[arg-type]
                   lambda k, t: None, ControllerMetrics())  # type: ignore[arg-type,return-value]
    r.report_failure(KEY, RuntimeError("boom"))
    assert api.status == {} and api.events == []
