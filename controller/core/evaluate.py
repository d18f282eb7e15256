"""One evaluation, the same in every host: collect -> decide -> record, then act or not.

Usage (a host: the local loop, the Kubernetes reconciler, the simulator)::

    ev = evaluate(collect, policy, history, now, limits)   # snapshot, decision, history
    if ev.decision.acts:
        try:
            carry_out(ev.decision)
            ev = ev.carried_out()          # the action enters the history
        except SomeRefusal as e:
            ev = ev.refused(str(e))        # not remembered as done: no cooldown, retried
    history = ev.history
    log.info("decision", job=..., **log_fields(ev))

``collect`` is the host's metrics adapter (Prometheus, the runner's scrape, a simulated job)
behind a callable, so this module stays pure: it reads no clock and does no I/O itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from contracts.history import DEFAULT_LIMITS, HistoryLimits, ScalingHistory
from contracts.policy import ScalingPolicySpec
from controller.core.decision import Decision, action_entry, record_recommendation
from controller.core.engine import decide
from controller.core.snapshot import MetricsSnapshot
from controller.core.taskcost import UNLEARNED as COST_UNLEARNED
from controller.core.taskcost import samples as cost_samples


class Collect(Protocol):
    """A host's metrics source: the job's snapshot over the last ``window_seconds`` at ``now``.

    Adapters that cannot answer return a snapshot with ``unavailable`` set (unknown, which
    holds), rather than raising."""

    def __call__(self, window_seconds: float, now: float) -> MetricsSnapshot: ...


@dataclass(frozen=True)
class Evaluation:
    """One evaluation: what was seen, what was decided, whether it was carried out."""

    time: float
    snapshot: MetricsSnapshot
    decision: Decision
    history: ScalingHistory
    """The history after this evaluation: its recommendation (and any block found), plus the
    action once :meth:`carried_out`."""
    acted: bool = False
    error: str | None = None
    """Why an action the decision asked for was not carried out (the actuator's refusal)."""
    limits: HistoryLimits = DEFAULT_LIMITS

    def carried_out(self) -> Evaluation:
        """The decision was carried out (or its intent durably started): remember the action."""
        if not self.decision.acts:
            return self
        s = self.snapshot
        entry = action_entry(
            self.decision, self.time, s.processed_rate, s.executors, s.backlog_age_seconds
        )
        return replace(self, acted=True, history=self.history.add(entry, self.time, self.limits))

    def refused(self, error: str) -> Evaluation:
        """The actuator refused or failed: the action is not remembered, so the next
        evaluation retries it (no cooldown starts)."""
        return replace(self, acted=False, error=error)


def evaluate(
    collect: Collect,
    policy: ScalingPolicySpec,
    history: ScalingHistory,
    now: float,
    limits: HistoryLimits = DEFAULT_LIMITS,
) -> Evaluation:
    """Collect a snapshot over the policy's window, decide, and record the recommendation and
    the window's task costs (what :mod:`~controller.core.taskcost` fits the fixed cost from;
    none from a window that does not describe one layout: ``taskcost.UNLEARNED``).

    The returned history holds the decision as not carried out; the host calls
    :meth:`Evaluation.carried_out` once it has acted (only decisions that ``acts``)."""
    snapshot = collect(policy.timing.window_seconds, now)
    decision = decide(snapshot, policy, history, now)
    recorded = record_recommendation(history, decision, now, limits=limits)
    if decision.reason not in COST_UNLEARNED:
        recorded = recorded.add_costs(cost_samples(snapshot, now), now, limits)
    return Evaluation(now, snapshot, decision, recorded, limits=limits)


def log_fields(ev: Evaluation) -> dict[str, object]:
    """The fields of the structured ``decision`` log line every host writes."""
    d = ev.decision
    return {
        "action": d.action.value,
        "reason": d.reason.value,
        "message": d.message,
        "target_executors": d.target_executors,
        "target_partitions": d.target_partitions,
        "enforced": d.enforced,
        "bottleneck": d.diagnosis.kind.value,
        "operator": d.diagnosis.operator,
        "evidence": list(d.diagnosis.evidence),
    }
