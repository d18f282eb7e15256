"""A reconcile pass that raises leaves a trace a person sees: Degraded
``ReconcileFailed`` in status and one Event when it starts, not only a log line and a backoff.
The API client is a stand-in (KubeApi is a seam we own); the real API server path of the same
writes is covered by tests/integration/k8s."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from controller.kube.controller_metrics import ControllerMetrics
from controller.kube.reconciler import FINALIZER, Reconciler
from controller.kube.settings import ControllerSettings
from tests.realcomponents import REPO

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


class FinalizedApi(StandInApi):
    """Holds the finalizer already; creating anything (``ensure``) is a failure of the test."""

    def set_finalizer(self, obj: dict[str, Any], present: bool) -> dict[str, Any]:
        return obj


def test_a_managed_job_with_a_bare_checkpoint_path_is_degraded_and_nothing_is_made() -> None:
    """An object the API server accepted before the CRD's shared-checkpoint rule (or with the
    CRD's rules off) is refused by the controller, naming the field: no Secret, no driver pod,
    status and one Event only."""
    sample = yaml.safe_load((REPO / "k8s" / "samples" / "streamjob-burst.yaml").read_text())
    job = copy.deepcopy(JOB)
    job["metadata"]["finalizers"] = [FINALIZER]
    job["spec"] = {**sample["spec"], "checkpoint": {"location": "/data/checkpoints/wc"}}
    api = FinalizedApi()
    r = Reconciler(api, ControllerSettings(), lambda k: job, lambda k: None,  # type: ignore[arg-type]
                   lambda k, t: None, ControllerMetrics(), clock=lambda: 1_000.0)  # type: ignore[arg-type,return-value]
    assert r.reconcile(KEY) == ControllerSettings().default_interval_seconds
    degraded = next(c for c in api.status["conditions"] if c["type"] == "Degraded")
    assert degraded["reason"] == "SpecInvalid", degraded
    assert "spec: checkpoint.location (/data/checkpoints/wc): a managed job's checkpoint must " \
           "be shared by the driver and every executor pod" in degraded["message"]
    assert [e[1] for e in api.events] == ["SpecInvalid"]


POLICY = {**yaml.safe_load((REPO / "policies" / "default.yaml").read_text()),
          "metadata": {"name": "default", "namespace": "jobs"}}


def test_no_driver_in_the_controllers_namespace() -> None:
    """A managed job in the controller's own namespace would run its author's code beside the
    controller's ServiceAccount (a pod there may name it): Degraded ``ControllerNamespace``,
    naming where to create it instead, and nothing is made (the stand-in has no ``ensure``)."""
    from controller.kube.settings import ManagedSettings

    sample = yaml.safe_load((REPO / "k8s" / "samples" / "streamjob-burst.yaml").read_text())
    job = copy.deepcopy(JOB)
    job["metadata"]["finalizers"] = [FINALIZER]
    job["spec"] = sample["spec"]
    api = FinalizedApi()
    settings = ControllerSettings(managed=ManagedSettings(controller_namespace="jobs"))
    r = Reconciler(api, settings, lambda k: job,  # type: ignore[arg-type]
                   lambda k: POLICY, lambda k, t: None,  # type: ignore[arg-type,return-value]
                   ControllerMetrics(), clock=lambda: 1_000.0)
    r.reconcile(KEY)
    degraded = next(c for c in api.status["conditions"] if c["type"] == "Degraded")
    assert degraded["reason"] == "ControllerNamespace", degraded
    assert "never run in the controller's namespace jobs" in degraded["message"]
    assert "jobNamespaces" in degraded["message"]
    assert [e[1] for e in api.events] == ["ControllerNamespace"]
