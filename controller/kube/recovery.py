"""A managed job's driver pod that is gone: the engine's recovery, sized from status, and the
layout the new driver pod starts with.

The reconciler recreates a vanished driver pod (deleted, evicted, its node lost). With no runner
to ask, what status last observed stands for the job's last snapshot
(:func:`recovery_from_status`), and the new pod restores the layout the recovery was sized for
(:func:`restored_layout`), state partitions included (``runner --state-partitions``), its
batches capped (``runner --max-records-per-batch``, :mod:`controller.core.admission`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from contracts.policy import ScalingPolicySpec
from contracts.streamjob import ActionIntent
from controller.core import Action, Decision, MetricsSnapshot
from controller.core.failure import recover
from controller.core.inputs import Inputs
from controller.kube.status import StatusDraft


class Restore(NamedTuple):
    """What a new driver pod starts with."""

    executors: int
    partitions: int | None
    """State partitions to repartition to before the query starts; None = the checkpoint's."""
    max_records_per_batch: int | None = None
    """The recovery's admission cap; None = the job's own."""


def restored_layout(
    intent: ActionIntent | None, recovery: Decision | None, executors: int
) -> Restore:
    """The executors, state partitions and admission cap a new driver pod starts with. A
    recovery restores the layout it was sized for -- the one just decided for a vanished pod
    (when enforced), or ours in flight (its intent) -- and a new count of state partitions is
    the runner's to set before its query starts (``runner --state-partitions``), as is the cap
    (``--max-records-per-batch``); otherwise ``executors`` on the checkpoint's partitions."""
    if recovery is not None and recovery.enforced and recovery.target_executors is not None:
        return Restore(recovery.target_executors, recovery.target_partitions,
                       recovery.max_records_per_batch)
    if intent is not None and intent.action == Action.RECOVER.value:
        return Restore(executors, intent.target_partitions, intent.max_records_per_batch)
    return Restore(executors, None)


def recovery_from_status(
    draft: StatusDraft, policy: ScalingPolicySpec, job: str, pod: str,
    trigger_seconds: float | None = None,
) -> Decision:
    """The engine's recovery (``controller.core.failure.recover``) for a driver pod that is
    gone: what status last observed (arrival rate, backlog and its age, executors) stands for
    the job's last snapshot, with the driver down; the history says what each executor
    delivered. The backlog was read when ``backlogObservedAt`` says, before the driver went
    (a lost node is called NotReady ~40 s later): what arrived since, at the last input rate,
    is added to it and to its age (:func:`aged_backlog`). Sized to drain that backlog plus what
    arrives during the restart within ``lag.catchUpSeconds``; with nothing measured yet, the
    last size. The decision says the
    pod ``pod`` is gone, not that a driver does not answer. ``trigger_seconds``: the job's
    trigger (its manifest's), which the admission cap's batch length derives from."""
    doc = draft.doc
    execs = doc.get("executors") or {}
    backlog, age = aged_backlog(doc, draft.now)
    snap = MetricsSnapshot(
        job=job, observed_at=draft.now, driver_up=False,
        arrival_rate=doc.get("inputRate"), processed_rate=doc.get("processedRate"),
        backlog_records=backlog, backlog_age_seconds=age,
        executors=execs.get("current"), target_executors=execs.get("target"),
        last_committed_batch=doc.get("lastCommittedBatch"),
        trigger_interval_seconds=trigger_seconds,
    )
    gone = f"driver pod {pod} is gone (deleted, evicted or its node lost)"
    return recover(Inputs(snap, policy, draft.history(), draft.now), (gone,))


def aged_backlog(doc: dict[str, Any], now: float) -> tuple[float | None, float | None]:
    """The backlog and its age (records, s) the status ``doc`` last showed, brought to ``now``:
    what arrived since ``backlogObservedAt`` at the last input rate added to the backlog, the
    time since to its age. Without the time (a status written before it was kept) or the rate,
    as shown. Held by tests/unit/kube/test_recovery_sizing.py."""
    backlog, age = doc.get("backlogRecords"), doc.get("lagSeconds")
    observed, rate = doc.get("backlogObservedAt"), doc.get("inputRate")
    if backlog is None or observed is None or rate is None:
        return backlog, age
    since = max(0.0, now - float(observed))
    return float(backlog) + float(rate) * since, None if age is None else float(age) + since
