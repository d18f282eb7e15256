"""What `make kind-burst` applies and reports, without a cluster: the job and policy pass the
API's own validation (as the API server would see a job run in pods), the volume is shared by
every node and bound to the claim the job names, and the report's actions come from the typed
history with the controller's Event messages."""

from __future__ import annotations

from app.kind_burst_job import CLAIM, SHARED_PATH, job_doc, policy_doc, volume_docs
from app.kind_burst_watch import action_line, actions_of
from contracts.manifests import validate
from contracts.policy import ScalingPolicy
from contracts.streamjob import StreamJob


def test_the_job_and_its_policy_are_valid_manifests_for_pods() -> None:
    job = validate(StreamJob, job_doc(SHARED_PATH), "kind-burst job", cluster=True)
    policy = validate(ScalingPolicy, policy_doc(), "kind-burst policy")
    assert job.spec.policy_ref.name == policy.metadata.name
    assert job.spec.checkpoint.volume is not None
    assert job.spec.checkpoint.volume.claim_name == CLAIM
    assert job.spec.checkpoint.location.startswith(SHARED_PATH)


def test_the_volume_is_read_write_many_on_the_shared_directory_and_bound_to_the_claim() -> None:
    pv, pvc = volume_docs()
    assert pv["spec"]["accessModes"] == pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pv["spec"]["hostPath"]["path"] == SHARED_PATH
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"  # a checkpoint outlives it
    assert pv["spec"]["claimRef"]["name"] == pvc["metadata"]["name"] == CLAIM
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    # the controller mounts only claims labelled for jobs (docs/security.md)
    assert pvc["metadata"]["labels"]["stream-autoscaler.io/job-reference"] == "true"


def test_actions_come_from_the_history_with_the_nearest_event_of_their_reason() -> None:
    t0 = 1_000.0
    status = {
        "history": {
            "entries": [
                {"time": 1_010.0, "kind": "recommendation", "executors": 4,
                 "reason": "RepartitionStateBound"},
                {"time": 1_075.0, "kind": "action", "action": "repartition", "executors": 4,
                 "executorsBefore": 1, "partitions": 4, "reason": "RepartitionStateBound",
                 "backlogAgeSeconds": 24.9},
                {"time": 1_289.0, "kind": "action", "action": "scale", "executors": 2,
                 "executorsBefore": 4, "reason": "ScaleIn"},
            ]
        }
    }  # fmt: skip
    events = [
        {"reason": "RepartitionStateBound", "message": "early", "time": 1_010.0},
        {"reason": "RepartitionStateBound", "message": "state-bound: 1 -> 4", "time": 1_076.0},
        {"reason": "ScaleIn", "message": "idle: 4 -> 2", "time": 1_290.0},
    ]
    got = actions_of(status, events, t0)
    assert [(a["t"], a["reason"], a["message"]) for a in got] == [
        (75.0, "RepartitionStateBound", "state-bound: 1 -> 4"),
        (289.0, "ScaleIn", "idle: 4 -> 2"),
    ]
    assert action_line(got[0]) == (
        "75 s repartition 1->4 executors, 4 partitions: RepartitionStateBound"
    )
    assert action_line(got[1]) == "289 s scale 4->2 executors: ScaleIn"
