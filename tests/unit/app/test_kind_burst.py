"""What `make kind-burst` applies and reports, without a cluster: the job and policy pass the
API's own validation (as the API server would see a job run in pods), the volume is shared by
every node and bound to the claim the job names, and the report's actions come from the typed
history with the controller's Event messages."""

from __future__ import annotations

import pytest

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


def test_failed_tasks_adds_the_drivers_series_and_reads_none_as_zero() -> None:
    from app.kind_burst_watch import failed_tasks

    text = (
        "# TYPE stream_autoscaler_failed_tasks_total counter\n"
        'stream_autoscaler_failed_tasks_total{job="kind-burst",stage="3"} 2.0\n'
        'stream_autoscaler_failed_tasks_total{job="kind-burst",stage="5"} 1.0\n'
        'stream_autoscaler_failed_tasks_totally_other{job="kind-burst"} 9.0\n'
    )
    assert failed_tasks(text) == 3.0
    assert failed_tasks("# nothing failed yet\n") == 0.0


def test_a_pod_with_the_rpc_secret_as_an_env_value_is_named() -> None:
    from app.kind_burst_watch import rpc_secret_in_env

    def pod(name: str, env: list[dict[str, object]]) -> dict[str, object]:
        return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "env": env}]}}

    from_file = [{"name": "SPARK_AUTH_SECRET_FILE", "value": "/etc/spark-auth/secret"}]
    leaked = [{"name": "_SPARK_AUTH_SECRET", "value": "s3cr3t"}]
    assert rpc_secret_in_env([pod("driver", from_file), pod("exec-1", leaked)]) == ["exec-1"]


class _Kubectl:
    """The seam kind-burst owns: ``exec`` answers the driver's /status."""

    def __init__(self, status: dict[str, object]) -> None:
        self.status, self.execs = status, 0

    def run(self, *args: str, **_: object) -> str:
        import json

        assert args[0] == "exec"
        self.execs += 1
        return json.dumps(self.status)


def test_a_scale_in_is_read_from_the_runner_that_did_it_with_the_tasks_failed_around_it(
) -> None:
    from typing import cast

    from app.kind_burst import scaled_in
    from app.kind_burst_watch import Kubectl, Sampler, ScaleIns

    t0 = 1_000.0
    runner = {"recentActions": [
        {"kind": "repartition", "id": "r1", "state": "succeeded", "started_at": 1_050.0,
         "finished_at": 1_070.0},
        {"kind": "executors", "id": "s1", "state": "succeeded", "started_at": 1_301.0,
         "finished_at": 1_303.5, "result": {"killed": ["3"], "graceful": "batch-boundary"},
         "steps": {"stop_wait": 0.2}},
    ]}  # fmt: skip
    kubectl = _Kubectl(runner)
    sampler = Sampler(cast(Kubectl, kubectl), t0=t0)
    sampler.pods = [{"metadata": {"name": "kind-burst-driver", "labels": {"spark-role": "driver"}},
                     "status": {"phase": "Running"}}]
    sampler.failed_tasks = [(290.0, 4.0), (298.0, 4.0), (304.0, 4.0)]
    history = {"entries": [
        {"time": 1_049.0, "kind": "action", "action": "repartition", "executors": 4,
         "executorsBefore": 1, "partitions": 4, "reason": "RepartitionStateBound"},
        {"time": 1_300.0, "kind": "action", "action": "scale", "executors": 1,
         "executorsBefore": 2, "reason": "ScaleIn"},
    ]}  # fmt: skip
    ins = ScaleIns(cast(Kubectl, kubectl))
    # in flight: nothing read yet, and the run is not back to the quiet's size
    ins.step(sampler, {"history": history, "intent": {"actionId": "s1", "action": "scale"}})
    assert ins.done == [] and kubectl.execs == 0
    assert not scaled_in({"history": history}, ins, t0)
    ins.step(sampler, {"history": history})
    assert [(d["action_id"], d["graceful"], d["failed_tasks"]) for d in ins.done] == [
        ("s1", "batch-boundary", 0.0)]
    assert scaled_in({"history": history}, ins, t0)
    ins.step(sampler, {"history": history})  # read once
    assert len(ins.done) == 1 and kubectl.execs == 1
    # a later action (a recovery) wants a scale-in after it
    later = {"entries": [*history["entries"], {
        "time": 1_400.0, "kind": "action", "action": "recover", "executors": 3,
        "reason": "RecoverFromFailure"}]}  # fmt: skip
    assert not scaled_in({"history": later}, ins, t0)
    # ... unless it recovered from the driver's node lost after that scale-in: the scale-in
    # before the loss is the run's
    assert scaled_in({"history": later}, ins, t0, driver_lost_at=1_390.0)
    assert not scaled_in({"history": later}, ins, t0, driver_lost_at=1_410.0)
    # a run that never acted has nothing to scale in
    assert scaled_in({}, ScaleIns(cast(Kubectl, kubectl)), t0)


def test_the_drivers_node_crashes_only_once_a_scale_in_has_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A recovery may size the job at the policy's minimum, leaving the quiet nothing to scale
    in: the run's scale-in is seen before the crash (tests/integration/kind holds the rest)."""
    from typing import cast

    from app import kind_burst_failures
    from app.demo_report import Row
    from app.kind_burst_failures import DRIVER_LOSS_AFTER_SECONDS, DriverNodeLoss
    from app.kind_burst_watch import Kubectl, Sampler, ScaleIns

    killed: list[list[str]] = []
    monkeypatch.setattr(kind_burst_failures.subprocess, "run",
                        lambda cmd, **_: killed.append(cmd))  # fmt: skip
    kubectl = cast(Kubectl, _Kubectl({}))
    sampler = Sampler(kubectl, t0=0.0)
    sampler.rows = [Row(t=DRIVER_LOSS_AFTER_SECONDS + 1, input_rate=None, processed_rate=None,
                        backlog_records=None, lag_seconds=2.0, executors=2, executors_target=2,
                        partitions=4, phase="Running")]
    sampler.pods = [{"metadata": {"name": "kind-burst-driver", "uid": "u1",
                                  "labels": {"spark-role": "driver"}},
                     "spec": {"nodeName": "w2"}, "status": {"phase": "Running"}}]
    ins = ScaleIns(kubectl)
    crash = DriverNodeLoss(kubectl, scale_ins=ins)
    crash.step(sampler, {"lastCommittedBatch": 20})
    assert crash.node is None and killed == []
    ins.done.append({"history_time": 150.0, "at_s": 150.0, "state": None,
                     "unread": "no runner record within 60 s"})
    crash.step(sampler, {"lastCommittedBatch": 21})
    assert crash.node is None and killed == []  # a scale-in not read is not one that ran
    ins.done.append({"history_time": 160.0, "at_s": 160.0, "state": "succeeded"})
    crash.step(sampler, {"lastCommittedBatch": 22})
    assert crash.node == "w2" and crash.batch_before == 22 and killed[0][1:] == ["kill", "w2"]
    # the new driver runs; the StreamJob's status still shows the lost driver's last commit
    # (past the batch read at the crash) and what an earlier restart resumed from: the first
    # commit is the new runner's own, read from it
    sampler.pods = [{"metadata": {"name": "kind-burst-driver", "uid": "u2",
                                  "labels": {"spark-role": "driver"}},
                     "spec": {"nodeName": "w1"}, "status": {"phase": "Running"}}]
    monkeypatch.setattr(kind_burst_failures, "_ready", lambda *_: "False")
    runner = cast(_Kubectl, kubectl)
    runner.status = {"lastCommittedBatch": 21, "resumedFromBatch": 21}  # resumed, no commit yet
    crash.step(sampler, {"lastCommittedBatch": 23, "resumedFromBatch": 5})
    assert "driver_running" in crash.marks and "first_commit" not in crash.marks
    runner.status = {"lastCommittedBatch": 22, "resumedFromBatch": 21}
    crash.step(sampler, {"lastCommittedBatch": 23, "resumedFromBatch": 5})
    assert "first_commit" in crash.marks and crash.resumed_from_batch == 21
