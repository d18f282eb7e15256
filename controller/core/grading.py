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
"""

from __future__ import annotations

from contracts.history import HistoryEntry
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
