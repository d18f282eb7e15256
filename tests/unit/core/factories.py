"""Builders for snapshots and histories used by the table tests.

The reference job: a read stage (8 source partitions) and a stateful stage, together costing
1e-4 task-seconds per record (one slot: 10,000 records/s at full utilization), trigger 1 s,
0.1 s fixed overhead per batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from contracts.history import HistoryEntry, ScalingHistory
from contracts.policy import ScalingPolicySpec
from controller.core import Action, BottleneckKind, MetricsSnapshot, Reason, StageMetrics, decide

NOW = 1_000.0
READ_COST = 4e-5
STATE_COST = 6e-5


def snapshot(
    *,
    arrival: float | None = 5_000.0,
    executors: int | None = 1,
    partitions: int = 8,
    backlog: float = 0.0,
    age: float = 0.0,
    observed_at: float | None = NOW,
    state_bytes: float | None = 5e7,
    **overrides: Any,
) -> MetricsSnapshot:
    """A healthy snapshot of the reference job; keyword overrides replace any field."""
    window = 30.0
    slots = max(executors or 1, 1)
    capacity = slots / (READ_COST + STATE_COST)
    processed = min(arrival or 0.0, capacity) if backlog == 0 else capacity
    records = processed * window
    batches, overhead = 30, 0.1
    fields: dict[str, Any] = {
        "job": "wordcount",
        "observed_at": observed_at,
        "window_seconds": window,
        "batches": batches,
        "trigger_interval_seconds": 1.0,
        "overhead_seconds": overhead,
        "arrival_rate": arrival,
        "processed_rate": processed,
        "backlog_records": backlog,
        "backlog_age_seconds": age,
        "executors": executors,
        "cores_per_executor": 1,
        "source_partitions": 8,
        "driver_up": True,
        "seconds_since_progress": 1.0,
        "stages": (
            StageMetrics(
                name="source",
                kind="source",
                partitions=8,
                rows=records,
                busy_seconds=records * READ_COST,
            ),
            StageMetrics(
                name="counts",
                kind="stateful",
                partitions=partitions,
                rows=records,
                busy_seconds=records * STATE_COST,
                state_bytes=state_bytes,
                state_rows=10_000,
            ),
        ),
    }
    fields.update(overrides)
    if "batch_duration_seconds" not in overrides:
        fields["batch_duration_seconds"] = overhead + _work_per_batch(fields, slots)
    return MetricsSnapshot(**fields)


def _work_per_batch(fields: dict[str, Any], slots: int) -> float:
    """A batch's wall time for work: each stage's busy time in waves of its tasks over the
    slots (no stragglers), so the snapshot's batches agree with its busy times."""
    total = 0.0
    for st in fields["stages"]:
        tasks = st.partitions or slots
        total += (st.busy_seconds or 0.0) * math.ceil(tasks / max(1, slots)) / tasks
    return total / max(1, fields["batches"] or 1)


def history(*entries: tuple[float, str, int] | HistoryEntry) -> ScalingHistory:
    """History from (seconds ago, kind, executors) triples or full entries."""
    out: list[HistoryEntry] = []
    for e in entries:
        if isinstance(e, HistoryEntry):
            out.append(e)
        else:
            ago, kind, n = e
            out.append(
                HistoryEntry(time=NOW - ago, kind=kind, executors=n, action="scale")  # type: ignore[arg-type]
            )
    return ScalingHistory(entries=tuple(out))


# --- the decide() table -------------------------------------------------------------------


def policy(**spec: Any) -> ScalingPolicySpec:
    return ScalingPolicySpec.model_validate(spec)


@dataclass(frozen=True)
class Case:
    id: str
    observed: MetricsSnapshot
    expected: tuple[Action, Reason, int | None, int | None]
    policy: ScalingPolicySpec = field(default_factory=ScalingPolicySpec)
    history: ScalingHistory = field(default_factory=ScalingHistory)
    diagnosis: BottleneckKind | None = None
    message_has: str = ""


def _two_stages(read: tuple[str, float], state: tuple[int, float], rows: float,
                **kw: Any) -> MetricsSnapshot:  # fmt: skip
    """The reference job's two stages with other costs: ``read`` (name, task-s per record) on 8
    source partitions, ``state`` (partitions, task-s per record), over ``rows`` records."""
    (read_name, read_cost), (partitions, state_cost) = read, state
    stages = (
        StageMetrics(name=read_name, kind="source", partitions=8, rows=rows,
                     busy_seconds=rows * read_cost),
        StageMetrics(name="counts", kind="stateful", partitions=partitions, rows=rows,
                     busy_seconds=rows * state_cost, state_bytes=5e7),
    )  # fmt: skip
    return snapshot(stages=stages, **kw)


def state_heavy(**kw: Any) -> MetricsSnapshot:
    """Nearly all the cost in the stateful stage (2e-4 task-s per record), the read stage free."""
    return _two_stages(("source", 1e-6), (kw.get("partitions", 2), 2e-4), 300_000.0, **kw)


def stateless_heavy(**kw: Any) -> MetricsSnapshot:
    """Nearly all the cost in the read stage (9e-5 task-s per record against 1e-5)."""
    return _two_stages(("parse", 9e-5), (8, 1e-5), 270_000.0, **kw)


def check(case: Case) -> None:
    """decide() on the case: the expected action, reason and targets, explained."""
    d = decide(case.observed, case.policy, case.history, NOW)
    assert (d.action, d.reason, d.target_executors, d.target_partitions) == case.expected, d.message
    assert d.message, "every decision explains itself"
    assert d.enforced is (case.policy.mode == "enforce")
    if case.diagnosis is not None:
        assert d.diagnosis.kind == case.diagnosis, d.diagnosis.evidence
    if case.message_has:
        assert case.message_has in d.message


CAP = 97_911
"""The cap the demo's restart set: records per batch."""


def capped(**kw: Any) -> MetricsSnapshot:
    """Capped batches that bind (the demo's, controller/core/caplift.py): three
    executors whose batches read ``rows_per_batch`` (default: the whole cap) in
    ``batch_seconds`` (default 0.9 s of a 1 s trigger), light on CPU, while 142,786 records/s
    arrive and a pile of 2 M waits."""
    rows_per_batch = kw.pop("rows_per_batch", CAP)
    seconds = kw.pop("batch_seconds", 0.9)
    batches = 30
    rows = rows_per_batch * batches
    stages = (
        StageMetrics(name="source", kind="source", partitions=3, rows=rows,
                     busy_seconds=rows * 2e-6),
        StageMetrics(name="counts", kind="stateful", partitions=3, rows=rows,
                     busy_seconds=rows * 4e-6, state_bytes=5e7, state_rows=2_000),
    )  # fmt: skip
    fields: dict[str, Any] = {
        "arrival": 142_786, "executors": 3, "partitions": 3, "backlog": 2e6, "age": 15,
        "stages": stages, "batches": batches, "trigger_interval_seconds": 1.0,
        "batch_duration_seconds": seconds, "processed_rate": rows / 30,
        "admission_cap_records": CAP,
    }  # fmt: skip
    fields.update(kw)
    return snapshot(**fields)


# --- the cooldown cases (test_cooldown.py runs them; test_engine.py counts their reasons) ----

def _recovered(ago: float) -> ScalingHistory:
    """A scale-out sized for 12,000 records/s on 2 executors, then a recovery to 2 ``ago``
    seconds before now (the default policy: restart 10 s, window 30 s, catch-up 60 s)."""
    return ScalingHistory(entries=(
        HistoryEntry(time=NOW - 600, kind="action", action="scale", executors=2,
                     reason="ScaleOut", rate_before=4_000, expected_rate=12_000),
        HistoryEntry(time=NOW - ago, kind="action", action="recover", executors=2,
                     reason="RecoverFromFailure"),
    ))  # fmt: skip


def _scaled_out_to_2(expected_rate: float) -> ScalingHistory:
    """A scale-out to 2 executors 10 s ago (within its cooldown), from 4,000 records/s,
    expecting ``expected_rate`` at the target utilization."""
    return ScalingHistory(entries=(HistoryEntry(
        time=NOW - 10, kind="action", action="scale", executors=2, reason="ScaleOut",
        rate_before=4_000, expected_rate=expected_rate),))  # fmt: skip


COOLDOWN_CASES = [
    Case(
        "cooldown after an action holds a scale-out",
        stateless_heavy(arrival=20_000, backlog=50_000, age=10),
        (Action.HOLD, Reason.COOLDOWN, None, None),
        history=history((10, "action", 1)),
    ),
    Case(
        "load that outgrew the last scale-out's sizing scales out within its cooldown",
        stateless_heavy(arrival=30_000, executors=2, backlog=100_000, age=20),
        (Action.REPARTITION, Reason.REPARTITION_OUT, 8, 8),
        history=_scaled_out_to_2(expected_rate=19_000),
    ),
    Case(
        "load within the last scale-out's sizing waits out its cooldown",
        stateless_heavy(arrival=30_000, executors=2, backlog=100_000, age=20),
        (Action.HOLD, Reason.COOLDOWN, None, None),
        history=_scaled_out_to_2(expected_rate=38_000),
    ),
    Case(
        "load past the last scale-out's target but within what it carries at "
        "utilization.high waits out its cooldown (a restart sized on a window that still held "
        "the load before a step is not restarted again on its own first batches)",
        stateless_heavy(arrival=30_000, executors=2, backlog=100_000, age=20),
        (Action.HOLD, Reason.COOLDOWN, None, None),
        history=_scaled_out_to_2(expected_rate=26_000),
    ),
    Case(
        "a scale-in does not hold back a scale-out (no cooldown after it)",
        stateless_heavy(arrival=20_000, backlog=50_000, age=10),
        (Action.SCALE, Reason.SCALE_OUT, 4, None),
        history=ScalingHistory(
            entries=(
                HistoryEntry(
                    time=NOW - 10, kind="action", action="scale", executors=1, reason="ScaleIn"
                ),
            )
        ),
    ),
    Case(
        "a scale-in's own transient at the same load and no lag does not undo it",
        stateless_heavy(arrival=40_000, executors=2, backlog=20_000, age=1),
        (Action.HOLD, Reason.COOLDOWN, None, None),
        history=ScalingHistory(
            entries=(
                HistoryEntry(time=NOW - 26, kind="action", action="scale", executors=2,
                             reason="ScaleIn", rate_before=40_000),
            )
        ),
        message_has="has not come back",
    ),
    Case(
        "a recovery's own transient does not size a scale-out while the load is within it",
        stateless_heavy(arrival=10_000, executors=2, backlog=400_000, age=45),
        (Action.HOLD, Reason.COOLDOWN, None, None),
        history=_recovered(ago=30),
        message_has="reload state and drain the outage's pile",
    ),
    Case(
        "after the recovery's restart, window and catch-up, the same reading scales out",
        stateless_heavy(arrival=10_000, executors=2, backlog=400_000, age=45),
        (Action.REPARTITION, Reason.REPARTITION_OUT, 8, 8),
        history=_recovered(ago=101),
    ),
    Case(
        "load beyond what the recovery was sized for scales out at once",
        stateless_heavy(arrival=14_000, executors=2, backlog=400_000, age=45),
        (Action.REPARTITION, Reason.REPARTITION_OUT, 8, 8),
        history=_recovered(ago=30),
    ),
    Case(
        "after a scale-in settled (cooldown and one window), the same reading scales out",
        stateless_heavy(arrival=40_000, executors=2, backlog=20_000, age=1),
        (Action.SCALE, Reason.SCALE_OUT, 8, None),
        history=ScalingHistory(
            entries=(
                HistoryEntry(time=NOW - 61, kind="action", action="scale", executors=2,
                             reason="ScaleIn", rate_before=40_000),
            )
        ),
    ),
    Case(
        "load that came back right after a scale-in scales out at once",
        stateless_heavy(arrival=48_000, executors=2, backlog=20_000, age=1),
        (Action.REPARTITION, Reason.REPARTITION_OUT, 8, 8),
        history=ScalingHistory(
            entries=(
                HistoryEntry(time=NOW - 26, kind="action", action="scale", executors=2,
                             reason="ScaleIn", rate_before=40_000),
            )
        ),
    ),
]
