"""The scaling history the engine's decisions depend on: part of the StreamJob status contract.

It lives in the StreamJob status (durable, not in memory), so it is bounded: at most
``HistoryLimits.max_entries`` entries, none older than ``HistoryLimits.max_age_seconds``.
Recommendations feed the scale-down deferral; actions feed the cooldown and the
ineffective-scale-up check; blocked entries are Dhalion's blacklist. Cost samples (one per stage
and window, at most ``HistoryLimits.max_cost_samples``, one per band of records per task) are
what the per-task fixed cost is fitted from (``controller.core.taskcost``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator

from contracts.api import Model
from contracts.reasons import Reason

EntryKind = Literal["recommendation", "action", "blocked", "grade"]


@dataclass(frozen=True)
class HistoryLimits:
    """Bounds of the stored history."""

    max_entries: int = 200
    """Enough for 30 min of recommendations at a 10 s interval plus the actions among them,
    while keeping the StreamJob status well under etcd's 1.5 MB object limit (~40 kB)."""
    max_age_seconds: float = 3600.0
    """Longer than any window the engine looks back over (stabilization, blacklist)."""
    max_cost_samples: int = 48
    """Cost samples kept (~3 kB of status): a few stages, each over the bands of records per
    task the job has run at (:data:`COST_BANDS_PER_DOUBLING`)."""


DEFAULT_LIMITS = HistoryLimits()

COST_BANDS_PER_DOUBLING = 2
"""Cost samples are kept one per stage and band of records per task, a band being a factor of
``2 ** (1 / COST_BANDS_PER_DOUBLING)``: a job that runs at one load for an hour keeps one sample
of it, not the hour, so the samples still span the loads it has seen."""


class HistoryEntry(Model):
    """One remembered recommendation, action or blocked move."""

    time: float = Field(description="Unix time (s).")
    kind: EntryKind
    action: str | None = Field(default=None, description="Action taken (action entries).")
    executors: int | None = Field(default=None, description="Target executors (count).")
    executors_before: int | None = Field(
        default=None, description="Executors when the action started (count; action entries)."
    )
    partitions: int | None = Field(default=None, description="Target state partitions (count).")
    reason: str = Field(
        default="", description="Reason code (contracts.reasons.Reason; empty for none)."
    )
    rate_before: float | None = Field(
        default=None, description="Processed rate when the action started (records/s)."
    )
    expected_rate: float | None = Field(
        default=None, description="Capacity the action was expected to deliver (records/s)."
    )
    backlog_age_seconds: float | None = Field(
        default=None,
        description="Age of the oldest unprocessed record when the action started (s; action "
        "entries).",
    )
    until: float | None = Field(default=None, description="Blocked until this Unix time (s).")
    achieved_rate: float | None = Field(
        default=None,
        description="Capacity the graded action delivered, measured while the job was "
        "saturated (records/s; grade entries; expectedRate is then its predicted full "
        "capacity).",
    )
    graded_time: float | None = Field(
        default=None, description="Unix time (s) of the action a grade entry judges."
    )

    @field_validator("reason")
    @classmethod
    def _a_reason_code(cls, v: str) -> str:
        """Only the engine's reason codes (or none): a history whose entries carry anything
        else was not written by the engine (``tests/unit/contracts/test_reasons.py``)."""
        if v and v not in Reason.__members__.values():
            raise ValueError(f"{v!r} is not a reason code (contracts.reasons.Reason)")
        return v

    def blocks(self, now: float, executors: int, partitions: int | None) -> bool:
        """This is a block in force against moving to (executors, partitions): see
        :meth:`ScalingHistory.blocked` for its scope."""
        return (
            self.kind == "blocked"
            and (self.until or 0) > now
            and self.executors is not None
            and executors >= self.executors
            and self.partitions == partitions
        )


class CostSample(Model):
    """One stage's task time over one evaluation window: busy time against tasks and records."""

    time: float = Field(description="Unix time (s).")
    stage: str = Field(description="Stage (operator) name.")
    tasks: float = Field(gt=0, description="Tasks the stage ran in the window (count).")
    records: float = Field(gt=0, description="Source records of the window (count).")
    busy_seconds: float = Field(ge=0, description="Task time summed over the tasks (s).")

    def band(self) -> tuple[str, int]:
        """The stage and band of records per task this sample stands for."""
        per_task = max(self.records / self.tasks, 1.0)
        return self.stage, math.floor(math.log2(per_task) * COST_BANDS_PER_DOUBLING)


class ScalingHistory(Model):
    """A bounded, serializable log of recommendations and actions, oldest first."""

    entries: tuple[HistoryEntry, ...] = ()
    costs: tuple[CostSample, ...] = Field(
        default=(),
        description="Per-stage task costs at the loads seen, oldest first (one per band of "
        "records per task).",
    )

    def add(
        self, entry: HistoryEntry, now: float, limits: HistoryLimits = DEFAULT_LIMITS
    ) -> ScalingHistory:
        """Returns a new history with ``entry`` appended and the bounds applied."""
        return self.model_copy(update={"entries": (*self.entries, entry)}).trimmed(now, limits)

    def add_costs(
        self, samples: tuple[CostSample, ...], now: float, limits: HistoryLimits = DEFAULT_LIMITS
    ) -> ScalingHistory:
        """Returns a new history with ``samples`` in, each replacing the sample of its band."""
        if not samples:
            return self
        bands = {s.band() for s in samples}
        kept = [c for c in self.costs if c.band() not in bands]
        return self.model_copy(update={"costs": (*kept, *samples)}).trimmed(now, limits)

    def trimmed(self, now: float, limits: HistoryLimits = DEFAULT_LIMITS) -> ScalingHistory:
        """Drops entries older than the age bound, then the oldest beyond the count bound.

        A blocked entry that is still in force is kept whatever its age, so trimming never lifts
        a block early.
        """
        horizon = now - limits.max_age_seconds
        kept = [
            e
            for e in self.entries
            if e.time >= horizon or (e.kind == "blocked" and (e.until or 0) > now)
        ]
        if len(kept) > limits.max_entries:
            kept = kept[len(kept) - limits.max_entries :]
        costs = [c for c in self.costs if c.time >= horizon][-limits.max_cost_samples :]
        return ScalingHistory(entries=tuple(kept), costs=tuple(costs))

    def since(self, t: float, kind: EntryKind) -> list[HistoryEntry]:
        """Entries of one kind at or after ``t``."""
        return [e for e in self.entries if e.kind == kind and e.time >= t]

    def last_action(self) -> HistoryEntry | None:
        """The most recent action, if any."""
        for e in reversed(self.entries):
            if e.kind == "action":
                return e
        return None

    def blocked(self, now: float, executors: int, partitions: int | None) -> HistoryEntry | None:
        """The block in force against moving to (executors, partitions), if any.

        A block is scoped to the kind of move it judged: an in-place scale-out (``partitions``
        None) that did not help blocks in-place moves to as many executors or more, never the
        repartition that spreads state over them; a repartition to ``p`` partitions blocks
        repartitions to ``p``. It ends at ``until``."""
        return next((e for e in self.entries if e.blocks(now, executors, partitions)), None)

    def direction_changes_since(self, t: float) -> int:
        """Scale-up/scale-down flips among the actions at or after ``t`` (the action before
        ``t`` sets the starting size)."""
        prev: int | None = None
        for e in self.entries:
            if e.kind == "action" and e.executors is not None and e.time < t:
                prev = e.executors
        flips, last_dir = 0, 0
        for e in self.entries:
            if e.kind != "action" or e.executors is None or e.time < t:
                continue
            if prev is not None and e.executors != prev:
                d = 1 if e.executors > prev else -1
                if last_dir and d != last_dir:
                    flips += 1
                last_dir = d
            prev = e.executors
        return flips

    def direction_changes(self) -> int:
        """Scale-up/scale-down flips among the recorded actions."""
        flips, last_dir, prev = 0, 0, None
        for e in self.entries:
            if e.kind != "action" or e.executors is None:
                continue
            if prev is not None and e.executors != prev:
                d = 1 if e.executors > prev else -1
                if last_dir and d != last_dir:
                    flips += 1
                last_dir = d
            prev = e.executors
        return flips
