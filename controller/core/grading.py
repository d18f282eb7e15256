"""Grade every action: the capacity it predicted against the capacity it delivered.

A scale-out, repartition or recovery is carried out on a prediction: ``N`` executors sustain
``X`` records/s at the target utilization, so about ``X / utilization.target`` at full use. Once
the action has settled (the cooldown, the executors' start-up and a whole window after it; a
restart's downtime budget too) and while the job is saturated (a backlog older than
``lag.backlogToleranceSeconds`` waits, so it processes as fast as it can), the processed rate
*is* its capacity, and the action is graded once: a ``grade`` entry in the history (the
StreamJob's status) with the predicted and the achieved rate. A job that keeps up after the
action is not graded: its capacity was never measured, only that it sufficed.

A grade below :data:`SHORTFALL_SHARE` of the prediction is named in the decision that finds it
("achieved 36% of the predicted capacity ..."), so a user sees that the machine, not the job,
changed (noisy neighbours, a slower node, a CPU limit lower than at calibration). Later
predictions already credit what scale-outs deliver
(:func:`~controller.core.guards.observed_gain_share`); the grade is the record a person reads.
``test_grading.py`` holds each case.

In ``mode: recommend`` nothing is carried out, so there is no action to grade; what is graded
is each scale-out the controller recommended and did not carry out (:func:`grade_recommendation`):
a settle time after the first recommendation of a run of them, what the job did without it —
fell behind its SLO (the recommendation was needed), fell behind within it, or kept up (not
needed so far) — with the rate it processed against the arrival. A user reads, before
enforcing, whether the controller's calls were right.
"""

from __future__ import annotations

from typing import Literal

from contracts.history import HistoryEntry
from contracts.policy import ScalingPolicySpec
from controller.core.cooldown import SCALE_OUT_REASONS
from controller.core.inputs import Inputs
from controller.core.reasons import RESTARTING_ACTIONS

SHORTFALL_SHARE = 0.6
"""An action that delivered less than this share of the capacity it predicted is named as a
shortfall: a gap that large is the machine, not the model's error (on a loaded machine the
demo's three half-core executors delivered 36% of the prediction; docs/benchmark.md keeps the
demo's predicted and achieved figures per run)."""


def settle_seconds(x: Inputs, action: HistoryEntry) -> float:
    """Seconds after ``action`` before a window describes its result alone."""
    t = x.policy.timing
    settle = t.cooldown_seconds + t.executor_startup_seconds + t.window_seconds
    if action.action in RESTARTING_ACTIONS:
        settle += x.policy.partitions.max_downtime_seconds
    return settle


def grade(x: Inputs) -> HistoryEntry | None:
    """The grade of the last action that added capacity, when it can be graded now (settled,
    the job saturated, not graded before); else None."""
    s, pol = x.snapshot, x.policy
    last = x.history.last_action()
    if last is None or last.reason not in SCALE_OUT_REASONS or not last.expected_rate:
        return None
    if any(e.kind == "grade" and e.graded_time == last.time for e in x.history.entries):
        return None
    if x.now - last.time < settle_seconds(x, last) or s.processed_rate is None:
        return None
    if (s.backlog_age_seconds or 0.0) <= pol.lag.backlog_tolerance_seconds:
        return None
    return HistoryEntry(
        time=x.now,
        kind="grade",
        action=last.action,
        executors=last.executors,
        partitions=last.partitions,
        reason=last.reason,
        expected_rate=last.expected_rate / pol.utilization.target,
        achieved_rate=s.processed_rate,
        graded_time=last.time,
    )


RECOMMENDED = "recommendation"
"""The ``action`` of a grade entry that judges a recommendation not carried out."""


def grade_recommendation(x: Inputs) -> HistoryEntry | None:
    """In ``mode: recommend``, the grade of the first scale-out recommended since the last one
    graded (the first of a run of such recommendations: one call, repeated each evaluation),
    once :func:`settle_seconds` have passed; else None. Its ``achieved_rate`` is what the job
    processed without it, its ``backlog_age_seconds`` how old the backlog is now."""
    s = x.snapshot
    if x.enforced or s.processed_rate is None or s.backlog_age_seconds is None:
        return None
    entries = x.history.entries
    judged = max((e.graded_time or 0.0 for e in entries if e.kind == "grade"), default=0.0)
    previous_out = False
    first: HistoryEntry | None = None
    for e in entries:
        if e.kind != "recommendation":
            continue
        out = e.reason in SCALE_OUT_REASONS
        if out and not previous_out and e.time > judged and e.expected_rate:
            first = e
            break
        previous_out = out
    if first is None or x.now - first.time < settle_seconds(x, first):
        return None
    return HistoryEntry(
        time=x.now,
        kind="grade",
        action=RECOMMENDED,
        executors=first.executors,
        partitions=first.partitions,
        reason=first.reason,
        expected_rate=(first.expected_rate or 0.0) / x.policy.utilization.target,
        achieved_rate=s.processed_rate,
        backlog_age_seconds=s.backlog_age_seconds,
        graded_time=first.time,
    )


RecommendationVerdict = Literal["needed", "behind", "not_needed"]


def recommendation_verdict(policy: ScalingPolicySpec, g: HistoryEntry) -> RecommendationVerdict:
    """What a recommendation's grade says: the job without it fell behind its SLO (needed),
    behind within it, or kept up (not needed so far)."""
    age = g.backlog_age_seconds or 0.0
    if age > policy.lag.slo_seconds:
        return "needed"
    if age > policy.lag.backlog_tolerance_seconds:
        return "behind"
    return "not_needed"


def described_recommendation(x: Inputs, g: HistoryEntry) -> str:
    """The clause a decision carries about a recommendation it graded."""
    pol, s = x.policy, x.snapshot
    age = g.backlog_age_seconds or 0.0
    verdict = {
        "needed": f"fell behind its {pol.lag.slo_seconds:g} s SLO: the scale-out was needed",
        "behind": "fell behind, within its SLO so far",
        "not_needed": "kept up: not needed so far",
    }[recommendation_verdict(pol, g)]
    arrival = f" of {s.arrival_rate:,.0f} arriving" if s.arrival_rate is not None else ""
    return (
        f"; graded the {g.reason} to {g.executors} executor(s) recommended "
        f"{x.now - (g.graded_time or x.now):.0f} s ago and not carried out (mode: recommend): "
        f"at {s.executors} executor(s) the job processes {g.achieved_rate or 0.0:,.0f} "
        f"records/s{arrival}, its backlog {age:.0f} s old: it {verdict}"
    )


def described(g: HistoryEntry | None) -> str:
    """The clause a decision carries about a grade it made ('' without one)."""
    if g is None or not g.expected_rate or g.achieved_rate is None:
        return ""
    share = g.achieved_rate / g.expected_rate
    what = (
        f"; graded the {g.reason} to {g.executors} executor(s): achieved {share:.0%} of the "
        f"predicted capacity ({g.achieved_rate:,.0f} of {g.expected_rate:,.0f} records/s)"
    )
    if share < SHORTFALL_SHARE:
        what += (
            ": a shortfall — the executors delivered less than the model measured (noisy "
            "neighbours, a slower node, or less CPU than at calibration); later sizing credits "
            "what scale-outs deliver"
        )
    return what
