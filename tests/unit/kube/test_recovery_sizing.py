"""A driver pod that vanished (deleted, evicted, its node lost) is recreated sized by the
engine's recovery (``controller.core.failure.recover``) from what status last observed: enough
executors to drain the backlog and what arrives during the restart within
``lag.catchUpSeconds`` — not at the last size. The real-pod stories check the
same on a real node (tests/integration/node/pods.py::kill_driver_and_recover)."""

from __future__ import annotations

import math
from typing import Any

from contracts.manifests import load_policy
from contracts.policy import ScalingPolicySpec
from controller.core import Action
from controller.kube.recovery import recovery_from_status, restored_layout
from controller.kube.status import StatusDraft
from tests.realcomponents import REPO

NOW = 10_000.0
POLICY = load_policy(REPO / "policies" / "default.yaml").spec
DRIVER = "wc-driver"


def status(history: list[dict[str, Any]]) -> dict[str, Any]:
    return {"inputRate": 6_000.0, "processedRate": 6_100.0, "backlogRecords": 300_000.0,
            "lagSeconds": 4.0, "executors": {"current": 2, "target": 2},
            "lastCommittedBatch": 40, "history": {"entries": history}}


def draft(doc: dict[str, Any]) -> StatusDraft:
    return StatusDraft.from_object({"metadata": {"generation": 1}, "status": doc}, NOW)


SCALED = [{"time": NOW - 120, "kind": "action", "action": "scale", "executors": 2,
           "reason": "ScaleOut", "rateBefore": 3_000.0, "expectedRate": 8_000.0}]


def test_sized_to_drain_the_backlog_and_the_restart_within_the_catch_up_time() -> None:
    d = recovery_from_status(draft(status(SCALED)), POLICY, "wc", DRIVER)
    per_executor = 8_000.0 / 2
    backlog = 300_000.0 + 6_000.0 * POLICY.partitions.restart_seconds
    required = 6_000.0 + backlog / POLICY.lag.catch_up_seconds
    want = min(max(math.ceil(required / per_executor), POLICY.executors.min),
               POLICY.executors.max)
    assert d.action is Action.RECOVER and d.enforced
    assert d.target_executors == want and want > 2, (d.target_executors, want)
    assert d.message.startswith(f"driver pod {DRIVER} is gone (deleted, evicted or its node "
                                "lost): restart from the latest checkpoint"), d.message
    assert "does not answer" not in d.message, d.message
    assert f"need {required:,.0f} records/s to drain {backlog:,.0f} records within " \
           f"{POLICY.lag.catch_up_seconds:g} s" in d.message, d.message


def test_what_arrived_since_the_backlog_was_read_is_drained_too() -> None:
    """The status's backlog was read before the driver went (a lost node is called NotReady
    ~40 s later); the arrivals since, at the last input rate, are part of what must drain."""
    from controller.core import MetricsSnapshot

    read_at = NOW - 60
    d = recovery_from_status(draft({**status(SCALED), "backlogObservedAt": read_at}), POLICY,
                             "wc", DRIVER)
    backlog = 300_000.0 + 6_000.0 * 60 + 6_000.0 * POLICY.partitions.restart_seconds
    required = 6_000.0 + backlog / POLICY.lag.catch_up_seconds
    assert f"need {required:,.0f} records/s to drain {backlog:,.0f} records" in d.message, \
        d.message
    want = min(math.ceil(required / 4_000.0), POLICY.executors.max)
    assert d.target_executors == want, (d.target_executors, want)
    # the status keeps when its backlog was read, and only from a snapshot that had one
    st = draft({})
    st.observe(MetricsSnapshot(job="wc", observed_at=read_at, arrival_rate=6_000.0,
                               backlog_records=300_000.0, backlog_age_seconds=4.0), None)
    assert st.doc["backlogObservedAt"] == read_at
    st.observe(MetricsSnapshot(job="wc", observed_at=NOW, driver_up=False), None)
    assert st.doc["backlogObservedAt"] == read_at and st.doc["backlogRecords"] == 300_000.0


def test_with_nothing_measured_the_last_size() -> None:
    d = recovery_from_status(draft(status([])), POLICY, "wc", DRIVER)
    assert d.target_executors == 2
    assert "no measured capacity yet: restarting at the last size" in d.message


def test_a_policy_that_only_recommends_does_not_enforce_the_size() -> None:
    observe: ScalingPolicySpec = POLICY.model_copy(update={"mode": "recommend"})
    d = recovery_from_status(draft(status(SCALED)), observe, "wc", DRIVER)
    assert not d.enforced


REPARTITIONED = [*SCALED, {"time": NOW - 60, "kind": "action", "action": "repartition",
                           "executors": 2, "partitions": 2, "reason": "RepartitionStateBound",
                           "rateBefore": 3_000.0, "expectedRate": 8_000.0}]


def test_the_new_driver_restores_with_the_state_partitions_the_recovery_was_sized_for() -> None:
    """Recovery as scale-out of a stateful job: from status alone (no stage costs measured) it
    keeps the checkpoint's state partitions, since a repartition at the new driver's start
    would lengthen the outage by rewriting the state and nothing shows the partitions bind
    (``controller.core.failure.recovery_partitions``); a recovery sized with more partitions
    (the engine's, where measured costs show they bind) reaches the new driver pod, which says
    so to its runner (``--state-partitions``: it finishes the batch the dead driver left, then
    repartitions, before its query starts)."""
    from contracts.streamjob import ActionIntent, StreamJob
    from controller.kube import resources
    from controller.kube.settings import ManagedSettings
    from tests.unit.kube.factories import JOB

    d = recovery_from_status(draft(status(REPARTITIONED)), POLICY, "wc", DRIVER)
    n = d.target_executors or 0
    assert n > 2 and d.target_partitions is None, (n, d.target_partitions)
    assert f"with {n} executor(s); " in d.message, d.message
    assert "2 state partitions kept: no measured stage cost" in d.message, d.message
    assert restored_layout(None, d, 2) == (n, None, None)  # no trigger known: no cap
    sized = d.model_copy(update={"target_partitions": n})
    assert restored_layout(None, sized, 2) == (n, n, None)
    # decided by the engine earlier and in flight (the pod was deleted by us): its intent
    ours = ActionIntent(action_id="r", action="recover", target_executors=n,
                        target_partitions=n, max_records_per_batch=5_000, started_at=NOW)
    assert restored_layout(ours, None, n) == (n, n, 5_000)
    scale = ActionIntent(action_id="s", action="scale", target_executors=4, started_at=NOW)
    assert restored_layout(scale, None, 4) == (4, None, None)
    observe = recovery_from_status(draft(status(REPARTITIONED)),
                                   POLICY.model_copy(update={"mode": "recommend"}), "wc", DRIVER)
    assert restored_layout(None, observe, 2) == (2, None, None)

    job = StreamJob.model_validate({k: v for k, v in JOB.items() if k != "status"})
    args = resources.driver_pod(JOB, job, ManagedSettings(), n, 8, n)["spec"]["containers"][0][
        "args"]
    assert args[args.index("--state-partitions") + 1] == str(n)
    plain = resources.driver_pod(JOB, job, ManagedSettings(), 2, 8)["spec"]["containers"][0][
        "args"]
    assert "--state-partitions" not in plain


def test_the_new_driver_caps_the_batches_that_drain_the_outage() -> None:
    """What piled up while the driver was gone would land in the new query's first batch: the
    recovery caps it (controller.core.admission) at what ``executors.max`` process in two of the
    job's triggers, from the expected rate in the history (status has no stage metrics), and the
    new driver pod passes it to its runner (``--max-records-per-batch``)."""
    from contracts.streamjob import StreamJob
    from controller.core.admission import ADMISSION_BATCH_TRIGGERS
    from controller.kube import resources
    from controller.kube.settings import ManagedSettings
    from tests.unit.kube.factories import JOB

    d = recovery_from_status(draft(status(SCALED)), POLICY, "wc", DRIVER, trigger_seconds=2.0)
    full = 8_000.0 / 2 / POLICY.utilization.target  # records/s per executor at full use
    want = math.ceil(full * POLICY.executors.max * min(ADMISSION_BATCH_TRIGGERS * 2.0, 15.0))
    assert d.max_records_per_batch == want, (d.max_records_per_batch, want)
    assert f"batches capped at {want:,} records" in d.message, d.message
    restore = restored_layout(None, d, 2)
    assert restore.max_records_per_batch == want
    job = StreamJob.model_validate({k: v for k, v in JOB.items() if k != "status"})
    pod = resources.driver_pod(JOB, job, ManagedSettings(), restore.executors, 8,
                               restore.partitions, restore.max_records_per_batch)
    args = pod["spec"]["containers"][0]["args"]
    assert args[args.index("--max-records-per-batch") + 1] == str(want)
