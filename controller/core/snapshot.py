"""What the engine knows about a job over one evaluation window.

Every measurement is optional: ``None`` means unknown, never zero (KEDA's worst incident was an
outage read as zero load). The metrics adapters (Prometheus, the runner's /status, the simulator)
build a snapshot; the engine only reads it.

Units: seconds, records, records per second, bytes. Window sums (``busy_seconds``, ``rows``) are
totals over the window; rates are per wall-clock second over the window.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator

from contracts.api import Model

StageKind = Literal["source", "stateless", "stateful", "sink"]


def _finite_or_none(v: object) -> object:
    """NaN, +/-Inf and negative readings from a metrics backend are unknown, not numbers."""
    if isinstance(v, bool):
        return v
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, int | float) and v < 0:
        return None
    return v


class StageMetrics(Model):
    """One stage of the micro-batch (a named operator, or the read stage) over the window."""

    name: str = Field(description="Operator name (or 'source' for the read stage).")
    kind: StageKind
    partitions: int | None = Field(
        default=None, ge=1, description="Tasks per batch: the stage's parallelism cap (count)."
    )
    rows: float | None = Field(default=None, ge=0, description="Rows in, over the window.")
    busy_seconds: float | None = Field(
        default=None, ge=0, description="Task time summed over tasks and batches (s): useful time."
    )
    wall_seconds: float | None = Field(
        default=None, ge=0, description="Stage wall time summed over batches (s)."
    )
    max_task_seconds: float | None = Field(
        default=None, ge=0, description="Longest task of the window's batches (s)."
    )
    median_task_seconds: float | None = Field(
        default=None, ge=0, description="Median task of the window's batches (s)."
    )
    state_rows: float | None = Field(default=None, ge=0, description="Keys in state (count).")
    state_bytes: float | None = Field(default=None, ge=0, description="State size (bytes).")
    state_memory_bytes: float | None = Field(
        default=None, ge=0, description="State store memory in use (bytes)."
    )

    _finite = field_validator("*", mode="before")(_finite_or_none)

    def true_rate_per_slot(self) -> float | None:
        """Rows per second of busy task time: the DS2 true processing rate of one slot."""
        if self.rows is None or self.busy_seconds is None or self.busy_seconds <= 0:
            return None
        if self.rows <= 0:
            return None
        return self.rows / self.busy_seconds


class MetricsSnapshot(Model):
    """A job's metrics over one evaluation window, as of ``observed_at``."""

    job: str
    observed_at: float | None = Field(
        default=None, description="Unix time of the newest data point (s); None = no data."
    )
    window_seconds: float | None = Field(default=None, gt=0, description="Window length (s).")
    batches: int | None = Field(default=None, ge=0, description="Completed batches in window.")
    trigger_interval_seconds: float | None = Field(
        default=None, ge=0, description="Trigger interval (s); 0 = as fast as possible."
    )
    batch_duration_seconds: float | None = Field(
        default=None, ge=0, description="Mean batch duration over the window (s)."
    )
    overhead_seconds: float | None = Field(
        default=None,
        ge=0,
        description="Mean fixed per-batch driver time (s): planning, offsets, WAL and commit.",
    )
    arrival_rate: float | None = Field(
        default=None, ge=0, description="Records/s arriving at the source (latest offset growth)."
    )
    processed_rate: float | None = Field(
        default=None, ge=0, description="Records/s processed (wall clock)."
    )
    backlog_records: float | None = Field(
        default=None, ge=0, description="Records available but not yet processed."
    )
    backlog_age_seconds: float | None = Field(
        default=None, ge=0, description="Age of the oldest unprocessed record (s): the lag."
    )
    executors: int | None = Field(default=None, ge=0, description="Live executors (count).")
    cores_per_executor: int | None = Field(default=None, ge=1, description="Slots per executor.")
    target_executors: int | None = Field(
        default=None, ge=0, description="Executors last requested (count)."
    )
    source_partitions: int | None = Field(
        default=None, ge=1, description="Source partitions (count): the read stage's cap."
    )
    stages: tuple[StageMetrics, ...] = Field(default=(), description="Per-stage metrics.")
    driver_up: bool | None = Field(default=None, description="Runner/driver reachable.")
    seconds_since_progress: float | None = Field(
        default=None, ge=0, description="Since the last committed batch (s)."
    )
    failed_tasks: int | None = Field(default=None, ge=0, description="Failed tasks in window.")
    executors_lost: int | None = Field(
        default=None, ge=0,
        description="Executors lost with their node in the window (the runner removed them).",
    )
    seconds_since_executor_loss: float | None = Field(
        default=None, ge=0,
        description="Since the runner last removed executors lost with their node (s); None "
        "before any.",
    )
    memory_used_ratio: float | None = Field(
        default=None, ge=0, description="Executor storage+execution memory in use / available."
    )
    unavailable: str | None = Field(
        default=None, description="Why the metrics backend gave nothing (shown in the hold)."
    )
    last_committed_batch: int | None = Field(
        default=None, ge=0, description="Newest committed batch id."
    )
    batch_in_flight_seconds: float | None = Field(
        default=None,
        ge=0,
        description="Age of the micro-batch running now (s), as of the evaluation; None when "
        "none runs or the runner does not say. A lower bound of that batch's duration.",
    )
    last_restart_seconds: float | None = Field(
        default=None,
        ge=0,
        description="How long the runner's last restart (a repartition or a re-spread of "
        "state) took, from its request to the query running again: the wait for a batch "
        "boundary, the stop, the state moved, the start (s). None before any.",
    )
    batch_in_flight_rows: float | None = Field(
        default=None, ge=0, description="Source records the running batch reads (its planned "
        "offsets); None when unknown or none runs."
    )
    admission_cap_records: float | None = Field(
        default=None, ge=0, description="Records per batch the admission cap of the query's "
        "last start allows (the controller's, :mod:`controller.core.admission`); None when it "
        "set none."
    )

    _finite = field_validator("*", mode="before")(_finite_or_none)

    @property
    def task_slots(self) -> int | None:
        """Executors x cores per executor."""
        if self.executors is None:
            return None
        return self.executors * (self.cores_per_executor or 1)

    def stateful_stage(self) -> StageMetrics | None:
        """The stateful stage with the most busy time (the one partitions matter for)."""
        stateful = [s for s in self.stages if s.kind == "stateful"]
        if not stateful:
            return None
        return max(stateful, key=lambda s: s.busy_seconds or 0.0)

    def state_bytes(self) -> float | None:
        """Total state size over stateful stages, None if any is unknown."""
        total = 0.0
        for s in self.stages:
            if s.kind == "stateful":
                if s.state_bytes is None:
                    return None
                total += s.state_bytes
        return total
