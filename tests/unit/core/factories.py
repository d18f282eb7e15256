"""Builders for snapshots and histories used by the table tests.

The reference job: a read stage (8 source partitions) and a stateful stage, together costing
1e-4 task-seconds per record (one slot: 10,000 records/s at full utilization), trigger 1 s,
0.1 s fixed overhead per batch.
"""

from __future__ import annotations

from typing import Any

from contracts.history import HistoryEntry, ScalingHistory
from controller.core import MetricsSnapshot, StageMetrics

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
    fields: dict[str, Any] = {
        "job": "wordcount",
        "observed_at": observed_at,
        "window_seconds": window,
        "batches": 30,
        "trigger_interval_seconds": 1.0,
        "batch_duration_seconds": 0.8,
        "overhead_seconds": 0.1,
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
    return MetricsSnapshot(**fields)


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
