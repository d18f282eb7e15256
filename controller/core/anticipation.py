"""Anticipation: executors up before a burst the job's own history predicts.

A reactive scale-out pays for every burst twice: the lag that builds while the engine sees the
burst, evaluates, and the new executors start (and, where a restart spreads state, while the job
is down); and the catch-up capacity that lag then needs. When the job's past bursts came at a
regular period (:func:`~controller.core.recurrence.recurrence`: at least
:data:`~controller.core.recurrence.RECURRENCE_MIN_BURSTS` scale-outs whose gaps are whole
periods within :data:`~controller.core.recurrence.RECURRENCE_TOLERANCE`), the next one is due
one period after the last, and the layout the last one needed is on record. So when the next is
due within the lead a scale-out takes — the executors' start (``timing.executorStartupSeconds``),
the restart's downtime when the last burst's scale-out restarted, one evaluation interval (the
next look may come too late), and the forecast's own error (how far the past gaps strayed from
whole periods) — the engine moves to that layout now, while the job is quiet, and says so with
the forecast and its accuracy (``test_anticipation.py``).

Never on a guess: without a period in the history there is no anticipation, and a forecast is
never fed by its own moves (recurrence ignores them). A burst that does not come costs what the
move added until the next scale-in, which the period weighs like any other
(:func:`~controller.core.recurrence.weigh_scale_in`). No admission cap: the restart happens while
the job is quiet, so no pile waits to be drained, and a cap sized on a quiet load would bind the
burst. Only a hold that says the job is fine as it is (within its band, at its minimum, a
deferred scale-in, a backlog the lag budget absorbs) gives way to it: a hold that refuses or
waits for something (metrics, a cooldown, an action in progress) does not.

Only where reacting is too slow: the last burst's reactive scale-out recorded the backlog's age
when it started; that age plus the executors' start (or the restart's downtime) is how old the
backlog grew before the move delivered (:func:`reaction_lag`). Below the lag SLO, reacting met
it, and moving ahead of the burst would only add executor-seconds (on a train of 8x bursts 90 s
apart the engine met the SLO either way and anticipating cost 20% more); at or over it, the move
ahead pays in lag (6x bursts every 210 s under a 15 s SLO: 178 -> 75 s over it,
``test_unseen_loads.py::test_anticipation_beats_reaction_on_periodic_bursts_under_a_tight_slo``).

No new threshold: the period, its tolerance, the SLO and the policy's timings decide.
"""

from __future__ import annotations

from contracts.history import HistoryEntry
from controller.core.capacity import CapacityModel
from controller.core.cooldown import cooldown
from controller.core.decision import Decision
from controller.core.inputs import Inputs
from controller.core.reasons import RESTARTING_ACTIONS, Action, Reason
from controller.core.recurrence import Recurrence, burst_downtime, recurrence

YIELDING_HOLDS = frozenset({
    Reason.WITHIN_BAND,
    Reason.AT_MIN,
    Reason.SCALE_DOWN_DEFERRED,
    Reason.WITHIN_LAG_BUDGET,
})  # fmt: skip
"""The holds an anticipated burst overrides: each says the job is fine as it is now."""


def lead_seconds(x: Inputs, rec: Recurrence) -> float:
    """How long before the burst a move to its layout must start: the executors' start, the
    restart's downtime when the last burst's move restarted, one evaluation interval and the
    forecast's past error."""
    t = x.policy.timing
    down = burst_downtime(x, rec)
    return t.executor_startup_seconds + down + t.evaluation_interval_seconds + rec.jitter


def reaction_lag(x: Inputs, rec: Recurrence) -> float | None:
    """How old the backlog grew by the time the last burst's reactive move delivered: its age
    when the move started, plus the executors' start (and the restart's downtime) during which
    it kept ageing. None when that move recorded no backlog age."""
    age = rec.last.backlog_age_seconds
    if age is None:
        return None
    t = x.policy.timing
    down = burst_downtime(x, rec)
    return age + max(t.executor_startup_seconds, down)


def anticipate(x: Inputs, model: CapacityModel, held: Decision) -> Decision | None:
    """The move ahead of the next burst the history predicts, or None (see the module)."""
    if held.action is not Action.HOLD or held.reason not in YIELDING_HOLDS:
        return None
    rec = recurrence(x.history, x.now)
    if rec is None:
        return None
    last = rec.last
    pol = x.policy.executors
    target = min(max(last.executors or 0, pol.min), pol.max)
    n_cur = model.current_executors
    restart = last.action in RESTARTING_ACTIONS
    partitions = (last.partitions or model.current_partitions) if restart else None
    if target <= n_cur and (partitions is None or partitions == model.current_partitions):
        return None
    lead = lead_seconds(x, rec)
    if rec.next_in > lead or cooldown(x, growing=True) is not None:
        return None
    exposure = reaction_lag(x, rec)
    if exposure is None or exposure < x.policy.lag.slo_seconds:
        return None  # reacting kept the last burst within the SLO: waiting costs nothing
    return Decision(
        action=Action.REPARTITION if restart else Action.SCALE,
        reason=Reason.ANTICIPATED_BURST,
        message=_said(rec, lead, n_cur, target, partitions, model.current_partitions, last)
        + f"; reacting to the last one let the backlog reach ~{exposure:.0f} s (SLO "
        f"{x.policy.lag.slo_seconds:g} s)",
        target_executors=target,
        target_partitions=partitions,
        enforced=x.enforced,
        diagnosis=held.diagnosis,
        sizing=held.sizing,
    )


def _said(
    rec: Recurrence, lead: float, n_cur: int, target: int, partitions: int | None,
    current_partitions: int | None, last: HistoryEntry,
) -> str:  # fmt: skip
    move = f"scaling {n_cur} -> {target} executors"
    if partitions is not None and partitions != current_partitions:
        move += f" with a restart repartitioning state {current_partitions} -> {partitions}"
    elif partitions is not None:
        move += " with a restart that spreads state over them"
    return (
        f"{rec.bursts} bursts came every ~{rec.period:.0f} s (each within {rec.jitter:.0f} s of "
        f"that period), the next due in ~{rec.next_in:.0f} s: {move} now, {lead:.0f} s ahead "
        f"of it, to the layout the last burst needed (t={last.time:.0f})"
    )
