"""Symptoms -> diagnosis: which stage binds the job, and what kind of bottleneck it is.

Dhalion's split: detectors look at the snapshot, the diagnosis names one cause with its evidence,
and the engine (``engine.py``) picks the resolution.
"""

from __future__ import annotations

from dataclasses import replace

from contracts.policy import ScalingPolicySpec
from controller.core.capacity import CapacityModel, Layout
from controller.core.decision import Diagnosis
from controller.core.inflight import evidence as in_flight_evidence
from controller.core.inflight import unexplained_stall
from controller.core.reasons import BottleneckKind
from controller.core.snapshot import MetricsSnapshot


def failure_evidence(s: MetricsSnapshot, policy: ScalingPolicySpec) -> list[str]:
    """Why the job looks failed (empty if it does not): the driver does not answer, or no batch
    committed for ``diagnosis.noProgressSeconds`` while data waits and no running batch explains
    the wait. A batch in flight, however long, is a slow job (under-provisioned), not a failed
    one: only the time before it started counts
    (:func:`~controller.core.inflight.unexplained_stall`). A query that terminated runs no
    batch, so the second rule catches it."""
    out: list[str] = []
    if s.driver_up is False:
        out.append("the driver (runner) does not answer")
    waiting = (s.backlog_records or 0) > 0 or (s.arrival_rate or 0) > 0
    stalled = unexplained_stall(s)
    if stalled is not None and stalled > policy.diagnosis.no_progress_seconds and waiting:
        since = s.seconds_since_progress or 0.0
        running = s.batch_in_flight_seconds
        why = (
            f" ({running:.0f} s of it explained by the batch in flight)"
            if running
            else " and no batch reported in flight"
        )
        out.append(f"no batch committed for {since:.0f} s while data waits{why}")
    return out


def diagnose(
    s: MetricsSnapshot, model: CapacityModel | None, policy: ScalingPolicySpec
) -> Diagnosis:
    """The bottleneck of the job as it runs now, with the evidence."""
    failed = failure_evidence(s, policy)
    if failed:
        return Diagnosis(kind=BottleneckKind.FAILURE, evidence=tuple(failed))
    if model is None:
        return Diagnosis(evidence=("not enough data to size the job",))
    layout = Layout(model.current_executors, model.current_partitions, restart=False)
    rate = s.arrival_rate if s.arrival_rate is not None else (s.processed_rate or 0.0)
    util = model.utilization(rate, layout)
    evidence = [f"busy {util:.0%} of the batch budget at {rate:,.0f} records/s"]
    overdue = in_flight_evidence(s, policy)
    if overdue:
        evidence.append(overdue)
    if model.wall_ratio > 1.0:
        evidence.append(
            f"batches of {model.batch_seconds:.2f} s (trigger {model.interval_seconds:g} s) take "
            f"{model.wall_ratio:.2f}x the tasks' busy time per record: capacity from wall time"
        )
    d = policy.diagnosis

    if s.memory_used_ratio is not None and s.memory_used_ratio > d.memory_pressure_ratio:
        evidence.append(
            f"executor memory {s.memory_used_ratio:.0%} in use (> {d.memory_pressure_ratio:.0%})"
        )
        return Diagnosis(kind=BottleneckKind.MEMORY, evidence=tuple(evidence), utilization=util)

    share = model.overhead_share_of_batch()
    if share > d.overhead_share:
        evidence.append(
            f"fixed per-batch driver time {model.overhead_seconds:.2f} s is {share:.0%} of the "
            f"longest batch the job may run "
            f"({max(model.interval_seconds, model.budget_seconds, model.batch_seconds):g} s)"
        )
        return Diagnosis(
            kind=BottleneckKind.DRIVER_OVERHEAD, evidence=tuple(evidence), utilization=util
        )

    stage = model.binding_stage(layout)
    if util <= policy.utilization.high:
        evidence.append(f"stage {stage.name} ({stage.kind}) takes the most time per record")
        return Diagnosis(operator=stage.name, evidence=tuple(evidence), utilization=util)
    slots = model.current_executors * model.cores_per_executor
    snap_stage = next((st for st in s.stages if st.name == stage.name), None)
    if (
        snap_stage is not None
        and snap_stage.max_task_seconds is not None
        and snap_stage.median_task_seconds
        and snap_stage.max_task_seconds > d.skew_ratio * snap_stage.median_task_seconds
    ):
        ratio = snap_stage.max_task_seconds / snap_stage.median_task_seconds
        evidence.append(f"stage {stage.name}: longest task {ratio:.1f}x the median")
        return Diagnosis(
            kind=BottleneckKind.SKEW,
            operator=stage.name,
            evidence=tuple(evidence),
            utilization=util,
        )

    if (
        stage.kind == "stateful"
        and model.current_partitions is not None
        and slots >= model.current_partitions
    ):
        evidence.append(
            f"stateful stage {stage.name} has {model.current_partitions} partitions for "
            f"{slots} slots: more executors cannot run more of its tasks"
        )
        return Diagnosis(
            kind=BottleneckKind.STATE_PARTITIONS,
            operator=stage.name,
            evidence=tuple(evidence),
            utilization=util,
        )
    if stage.kind == "source" and stage.partitions is not None and slots >= stage.partitions:
        evidence.append(
            f"read stage {stage.name} has {stage.partitions} source partitions for {slots} "
            "slots: more executors cannot run more of its tasks (Kafka: raise minPartitions or "
            "the topic's partitions)"
        )
        return Diagnosis(
            kind=BottleneckKind.SOURCE_PARTITIONS,
            operator=stage.name,
            evidence=tuple(evidence),
            utilization=util,
        )
    evidence.append(f"stage {stage.name} ({stage.kind}) takes the most time per record")
    return Diagnosis(
        kind=BottleneckKind.TASK_SLOTS,
        operator=stage.name,
        evidence=tuple(evidence),
        utilization=util,
    )


def source_partitions_needed(
    model: CapacityModel, rate: float, policy: ScalingPolicySpec
) -> tuple[int, int] | None:
    """``(source partitions, executors)``: the fewest source partitions, and then the fewest
    executors, that carry ``rate`` records/s at the policy's target utilization — what to set a
    Kafka source's ``minPartitions`` to when its read stage is partition-bound. None when the
    read stage has no partition cap, or no count within ``executors.max`` is enough."""
    capped = [st.partitions for st in model.stages if st.kind == "source" and st.partitions]
    if not capped:
        return None
    current = max(capped)
    slots_max = policy.executors.max * model.cores_per_executor
    first = max(model.current_executors, policy.executors.min, 1)
    top = policy.executors.max
    if first > top or current >= slots_max:
        return None

    def lifted(p: int) -> CapacityModel:
        return replace(
            model,
            stages=tuple(
                replace(st, partitions=max(p, st.partitions))
                if st.kind == "source" and st.partitions
                else st
                for st in model.stages
            ),
        )

    def fits(m: CapacityModel, n: int) -> bool:
        layout = Layout(n, model.current_partitions, restart=False)
        return m.utilization(rate, layout) <= policy.utilization.target

    # Utilization never rises with more source partitions or more executors (partitions lift a
    # cap; executors add slots), so both searches bisect: O(log(slots) * log(executors)) model
    # evaluations instead of slots x executors (1,000 executors x 64 cores took 88.8 s).
    if not fits(lifted(slots_max), top):
        return None
    lo, hi = current + 1, slots_max  # the fewest partitions that fit with every executor
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(lifted(mid), top):
            hi = mid
        else:
            lo = mid + 1
    best = lifted(lo)
    n_lo, n_hi = first, top  # then the fewest executors at that count
    while n_lo < n_hi:
        mid = (n_lo + n_hi) // 2
        if fits(best, mid):
            n_hi = mid
        else:
            n_lo = mid + 1
    return lo, n_lo
