"""The decision: what the engine asks for, and why.

``decide`` (in :mod:`controller.core.engine`) returns a :class:`Decision`; the adapters log it,
put it in Events and status, and, in ``enforce`` mode, carry it out. :func:`record` and its two
halves (:func:`record_recommendation`, :func:`action_entry`) are how a decision enters the
history; :mod:`controller.core.evaluate` uses them for every host.
"""

from __future__ import annotations

from pydantic import Field

from contracts.api import Model
from contracts.history import HistoryEntry, HistoryLimits, ScalingHistory
from controller.core.reasons import Action, BottleneckKind, Reason


class Diagnosis(Model):
    """The bottleneck operator, the kind of bottleneck, and the evidence for it."""

    kind: BottleneckKind = BottleneckKind.NONE
    operator: str | None = Field(default=None, description="Binding stage, if any.")
    evidence: tuple[str, ...] = Field(default=(), description="Observations that led here.")
    utilization: float | None = Field(
        default=None, description="Busy fraction of the job's batch time budget (0..1+)."
    )


class Sizing(Model):
    """The DS2-style numbers behind a recommendation (records/s, counts)."""

    required_rate: float | None = Field(
        default=None, description="Arrival rate plus backlog / catch-up time (records/s)."
    )
    capacity_rate: float | None = Field(
        default=None, description="Sustainable rate at current executors and partitions."
    )
    target_capacity_rate: float | None = Field(
        default=None, description="Sustainable rate at the recommended executors and partitions."
    )
    recommended_executors: int | None = Field(
        default=None, description="Executors the sizing asks for, before deferral and cooldown."
    )
    recommended_partitions: int | None = Field(default=None)
    catching_up: bool = Field(default=False, description="A backlog beyond tolerance is draining.")


class Decision(Model):
    """What to do, with a reason code and a human message."""

    action: Action
    reason: Reason
    message: str
    target_executors: int | None = Field(default=None, description="Executors to run (count).")
    target_partitions: int | None = Field(
        default=None, description="State partitions to run with (count)."
    )
    max_records_per_batch: int | None = Field(
        default=None,
        description="Admission cap for the query a repartition or recovery starts: records per "
        "micro-batch (controller.core.admission); None = the source's own.",
    )
    enforced: bool = Field(
        default=True, description="False in recommend mode: reported, not carried out."
    )
    diagnosis: Diagnosis = Field(default_factory=Diagnosis)
    sizing: Sizing = Field(default_factory=Sizing)
    block: HistoryEntry | None = Field(
        default=None, description="A move found ineffective, to remember as blocked."
    )
    grade: HistoryEntry | None = Field(
        default=None,
        description="The last action's predicted against achieved capacity, graded now "
        "(controller.core.grading), to remember.",
    )

    @property
    def acts(self) -> bool:
        """Whether an adapter should carry this decision out."""
        return self.enforced and self.action is not Action.HOLD

    def summary(self) -> str:
        """One line for logs and the terminal: ``Reason: message``."""
        return f"{self.reason.value}: {self.message}"


def record(
    history: ScalingHistory,
    decision: Decision,
    now: float,
    *,
    rate_before: float | None = None,
    executors_before: int | None = None,
    backlog_age: float | None = None,
    limits: HistoryLimits | None = None,
) -> ScalingHistory:
    """The history after ``decision``: its recommendation, and the action if one was taken."""
    lim = limits or HistoryLimits()
    h = record_recommendation(history, decision, now, limits=lim)
    if decision.acts:
        entry = action_entry(decision, now, rate_before, executors_before, backlog_age)
        h = h.add(entry, now, lim)
    return h


def record_recommendation(
    history: ScalingHistory, decision: Decision, now: float, *, limits: HistoryLimits | None = None
) -> ScalingHistory:
    """The history after ``decision`` when nothing was carried out (a hold, recommend mode, or
    an action the job refused): its recommendation and the block it found, if any."""
    lim = limits or HistoryLimits()
    h = history
    rec = decision.sizing.recommended_executors
    if rec is not None:
        h = h.add(
            HistoryEntry(
                time=now,
                kind="recommendation",
                executors=rec,
                partitions=decision.sizing.recommended_partitions,
                reason=decision.reason.value,
                expected_rate=decision.sizing.target_capacity_rate,
            ),
            now,
            lim,
        )
    if decision.block is not None:
        h = h.add(decision.block, now, lim)
    if decision.grade is not None:
        h = h.add(decision.grade, now, lim)
    return h


def action_entry(
    decision: Decision,
    now: float,
    rate_before: float | None,
    executors_before: int | None = None,
    backlog_age: float | None = None,
) -> HistoryEntry:
    """The history entry of ``decision`` carried out at ``now`` (the cooldown, the
    ineffective-scale-up check, the restart budget and the state's holders read it)."""
    return HistoryEntry(
        time=now,
        kind="action",
        action=decision.action.value,
        executors=decision.target_executors,
        executors_before=executors_before,
        partitions=decision.target_partitions,
        reason=decision.reason.value,
        rate_before=rate_before,
        expected_rate=decision.sizing.target_capacity_rate,
        backlog_age_seconds=backlog_age,
    )
