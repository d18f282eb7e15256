"""Pure builders of the controller: the status draft, the owned objects, the action steps."""

from __future__ import annotations

import yaml

from contracts.streamjob import ActionIntent, StreamJob
from controller.core import Action, Decision, MetricsSnapshot, Reason
from controller.kube import resources
from controller.kube.actions import steps as _steps
from controller.kube.settings import ManagedSettings
from controller.kube.status import StatusDraft
from tests.unit.kube.factories import JOB


def test_conditions_keep_their_transition_time_while_unchanged() -> None:
    d = StatusDraft({}, 3, now=100.0)
    d.condition("Ready", "True", "Running", "ok")
    first = d.body()
    d2 = StatusDraft(first, 4, now=200.0)
    d2.condition("Ready", "True", "Running", "still ok")
    ready = next(c for c in d2.body()["conditions"] if c["type"] == "Ready")
    assert ready["lastTransitionTime"] == "1970-01-01T00:01:40Z"
    assert ready["observedGeneration"] == 4 and ready["message"] == "still ok"
    d2.condition("Ready", "False", "NoMetrics", "gone")
    ready = next(c for c in d2.body()["conditions"] if c["type"] == "Ready")
    assert ready["lastTransitionTime"] == "1970-01-01T00:03:20Z"


def test_observe_fills_the_printer_columns_and_unknown_stays_unknown() -> None:
    d = StatusDraft({}, 1, now=100.0)
    d.observe(MetricsSnapshot(job="wc", observed_at=100.0, arrival_rate=12345.678,
                              processed_rate=None, executors=2, backlog_age_seconds=3.21), None)
    body = d.body()
    assert body["executorsDisplay"] == "2/?"
    assert body["inputRate"] == 12300.0  # three significant figures
    assert "processedRate" not in body  # None is unknown, never zero


def test_decision_and_intent_round_trip() -> None:
    d = StatusDraft({}, 1, now=100.0)
    dec = Decision(action=Action.SCALE, reason=Reason.SCALE_OUT, message="2 -> 4",
                   target_executors=4)
    d.decided(dec)
    d.set_intent(ActionIntent(action_id="a-1", action="scale", target_executors=4,
                              started_at=100.0))
    body = d.body()
    assert body["lastDecision"]["reason"] == "ScaleOut" and body["bottleneck"] == "None"
    again = StatusDraft(body, 1, now=101.0)
    assert again.intent() is not None and again.intent().action_id == "a-1"
    again.set_intent(None)
    assert "intent" not in again.body()


def test_a_repartition_with_executors_is_two_steps_each_with_its_id() -> None:
    i = ActionIntent(action_id="x", action="repartition", target_executors=4,
                     target_partitions=8, started_at=0)
    assert _steps(i) == [("x-x", "executors", 4), ("x", "repartition", 8)]
    s = ActionIntent(action_id="y", action="scale", target_executors=2, started_at=0)
    assert _steps(s) == [("y", "executors", 2)]


def test_owned_objects_carry_the_owner_and_the_driver_runs_on_kubernetes() -> None:
    job = StreamJob.model_validate({k: v for k, v in JOB.items() if k != "status"})
    s = ManagedSettings(image="img:1")
    names = resources.Names.of(JOB)
    pod = resources.driver_pod(JOB, job, s, executors=2, max_executors=8)
    owner = pod["metadata"]["ownerReferences"][0]
    assert owner == {"apiVersion": "stream-autoscaler.io/v1alpha1", "kind": "StreamJob",
                     "name": "wc", "uid": "1234-5678", "controller": True,
                     "blockOwnerDeletion": True}
    args = pod["spec"]["containers"][0]["args"]
    assert args[args.index("--executors") + 1] == "2"
    assert args[args.index("--max-executors") + 1] == "8"
    env = pod["spec"]["containers"][0]["env"][0]
    assert env["valueFrom"]["secretKeyRef"] == {"name": names.secret, "key": "token"}
    manifest = yaml.safe_load(resources.runner_manifest(job, names, s, 2))
    conf = manifest["spec"]["spark"]["conf"]
    assert manifest["spec"]["spark"]["master"] == "k8s://https://kubernetes.default.svc"
    assert conf["spark.driver.host"] == "wc-driver-svc.jobs.svc"
    # executors connect to that name (Spark 4.3 would hand them the bind address 0.0.0.0)
    assert conf["spark.kubernetes.executor.useDriverPodIP"] == "false"
    assert conf["spark.kubernetes.container.image"] == "img:1"
    assert "attach" not in manifest["spec"] and "status" not in manifest
    svc = resources.service(JOB, s)
    assert svc["spec"]["clusterIP"] == "None"
    # the name resolves before the driver is Ready (its executors register through it first)
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == {"stream-autoscaler.io/job": "wc", "spark-role": "driver"}
