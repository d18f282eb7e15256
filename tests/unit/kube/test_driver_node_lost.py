"""A managed job's driver pod on a node that stopped reporting (``Reconciler._driver_node_lost``):
force-deleted so that the next pass recreates it from the latest checkpoint — where the
checkpoint's lock fences the old driver — and left to Kubernetes, Degraded and saying why, where
the checkpoint is on an object store. The API client is a stand-in (KubeApi is a seam we own);
the kind tier loses the driver's node for real."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from contracts.pods import parse_time
from contracts.streamjob import StreamJob
from controller.kube import resources
from controller.kube.controller_metrics import ControllerMetrics
from controller.kube.reconciler import Degraded, Reconciler
from controller.kube.settings import ControllerSettings
from controller.kube.status import StatusDraft
from tests.realcomponents import REPO

SAMPLE = yaml.safe_load((REPO / "k8s" / "samples" / "streamjob-burst.yaml").read_text())
OBJ: dict[str, Any] = {**SAMPLE, "metadata": {"name": "wc", "namespace": "jobs", "uid": "u"},
                       "status": {"lastCommittedBatch": 41}}
SINCE = "2026-11-28T21:00:00Z"
NOW = (parse_time(SINCE) or 0.0) + 25.0
POD = {"metadata": {"name": "wc-driver"}, "spec": {"nodeName": "kind-worker"},
       "status": {"phase": "Running",
                  "conditions": [{"type": "Ready", "status": "False",
                                  "lastTransitionTime": SINCE},
                                 {"type": "ContainersReady", "status": "True",
                                  "lastTransitionTime": SINCE}],
                  "containerStatuses": [{"name": "runner", "state": {"running": {}}}]}}


class StandInApi:
    def __init__(self) -> None:
        self.deleted: list[tuple[str, str, int]] = []
        self.events: list[tuple[str, str, str]] = []

    def delete_pod(self, namespace: str, name: str, grace_seconds: int = 30) -> None:
        self.deleted.append((namespace, name, grace_seconds))

    def event(self, obj: dict[str, Any], type_: str, reason: str, message: str,
              action: str = "") -> None:
        self.events.append((type_, reason, message))


def _lose(obj: dict[str, Any]) -> tuple[StandInApi, StatusDraft]:
    api = StandInApi()
    r = Reconciler(api, ControllerSettings(), lambda k: None, lambda k: None,  # type: ignore[arg-type]
                   lambda k, t: None, ControllerMetrics(), clock=lambda: NOW)  # type: ignore[arg-type,return-value]
    draft = StatusDraft.from_object(copy.deepcopy(obj), NOW)
    job = StreamJob.model_validate({k: v for k, v in obj.items() if k != "status"})
    r._driver_node_lost(obj, draft, job, resources.Names.of(obj), POD)
    return api, draft


def test_a_driver_on_a_lost_node_is_force_deleted_and_the_node_named() -> None:
    api, draft = _lose(OBJ)
    assert api.deleted == [("jobs", "wc-driver", 0)]
    ((type_, reason, message),) = api.events
    assert (type_, reason) == ("Warning", "DriverNodeLost")
    assert "driver pod wc-driver on node kind-worker has not been Ready for 25 s" in message
    assert draft.doc["phase"] == "Recovering"
    ready = next(c for c in draft.doc["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "DriverNodeLost")


def test_on_an_object_store_nothing_fences_the_old_driver_so_it_is_left_to_kubernetes() -> None:
    obj = copy.deepcopy(OBJ)
    obj["spec"]["checkpoint"] = {"location": "s3a://bucket/wc",
                                 "credentials": {"secretName": "s3"}}
    with pytest.raises(Degraded) as e:
        _lose(obj)
    assert e.value.reason == "DriverNodeLost"
    assert "no lock to fence the old driver" in e.value.message
