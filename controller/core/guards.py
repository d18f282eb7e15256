"""The guards between a sizing and an action: the band, cooldown, deferral, blocks and caps.

:func:`band` takes the sizing (:mod:`~controller.core.sizing`) and decides whether to act on it:

- act only outside ``[utilization.low, utilization.high]``, or where a layout
  :data:`SURPLUS_SHARE` smaller carries the arrival at the target (a catch-up's surplus, released
  as a scale-in);
- never grow while the backlog already drains within ``lag.catchUpSeconds`` at the current size,
  and never shrink while catching up;
- no action within ``timing.cooldownSeconds`` of the last one
  (:func:`~controller.core.cooldown.cooldown`), except a
  scale-out for load that outgrew the last scale-out's sizing, or that came back (or a lag that
  grows) after a scale-in;
- scale in only once a whole ``timing.scaleDownStabilizationSeconds`` window recommended fewer
  executors, to the highest recommendation of that window (:func:`scale_in`); the window grows by
  :data:`FLIP_BACKOFF` for each recent direction change, so a load oscillating near the window
  does not make the job flip with it;
- a scale-out that delivered less than ``safety.ineffectiveScaleUpRatio`` of its expected gain is
  blocked for ``safety.blockedActionSeconds`` (Dhalion's blacklist, :func:`ineffective`): only
  scale-outs are judged, and the block covers the kind of move judged (in place, or a
  repartition to those partitions), so it never stops the repartition that would help;
- the caps (``executors.min/max``, ``safety.maxScaleUpFactor``) bound the sizing itself
  (:func:`~controller.core.sizing.ceiling`); a sizing that hits them holds with the reason.
"""

from __future__ import annotations

import math

from contracts.history import HistoryEntry
from controller.core.admission import admission_cap, described
from controller.core.capacity import CapacityModel, Layout
from controller.core.cooldown import SCALE_OUT_REASONS, cooldown, recovery_transient
from controller.core.decision import Decision, Diagnosis, Sizing
from controller.core.grading import settle_seconds
from controller.core.holds import hot_key, lag_budget_room, step_in_span
from controller.core.inputs import Inputs
from controller.core.reasons import Action, BottleneckKind, Reason
from controller.core.recurrence import weigh_scale_in
from controller.core.sizing import Demand, Plan, ceiling, drain_seconds

FLIP_BACKOFF = 1.0
"""Each scale direction change within :data:`FLIP_MEMORY` stabilization windows lengthens the
next scale-in's stabilization window by this many windows (0 flips: one window; 2 flips: three)."""
FLIP_MEMORY = 5.0
"""How far back direction changes count, in stabilization windows."""
SURPLUS_SHARE = 0.25
"""A layout at least this share of the executors smaller that carries the arrival at the target
utilization makes the rest a surplus, released like any scale-in (after a stabilization window
of such recommendations), though the arrival alone keeps the job inside the band: a catch-up's
or a burst's capacity that the band would otherwise keep for good (a 5x step held 20 minutes on
the 16 executors its catch-up asked for, 45% busy: ``test_engine.py``, "a catch-up's surplus")."""


def below(share: float, limit: float) -> str:
    """``share`` against the ``limit`` it is under, as "14% (< 40%)": whole percents, or the
    share's tenths, rounded down, where whole percents would print the two alike ("40% (< 40%)"
    for 0.396 under 0.40; tests/unit/core/test_guards.py)."""
    whole = f"{share:.0%}"
    if share < limit and round(share * 100) >= round(limit * 100):
        whole = f"{math.floor(share * 1000) / 1000:.1%}"
    return f"{whole} (< {limit:.0%})"


def band(
    x: Inputs, model: CapacityModel, d: Demand, plan: Plan, sizing: Sizing, diagnosis: Diagnosis
) -> Decision:
    """Act on the sizing, or hold and say which guard stopped it."""
    s, pol = x.snapshot, x.policy
    current, backlog, arrival, required = d.current, d.backlog, d.arrival, d.required
    catching_up = d.catching_up
    util_needed = model.utilization(required, current)
    util_arrival = model.utilization(arrival, current)
    n_cur = current.executors
    grows = plan.layout.executors > n_cur or (
        plan.layout.restart
        and (plan.layout.partitions != current.partitions or model.spreads_state(plan.layout))
    )

    cooling = cooldown(x, growing=grows) or (recovery_transient(x) if grows else None)
    drain = drain_seconds(backlog, arrival, model.capacity(current))
    within = d.drain_within or pol.lag.catch_up_seconds
    if (
        grows
        and catching_up
        and util_arrival <= pol.utilization.high
        and drain is not None
        and drain <= within
        and (s.backlog_age_seconds or 0.0) < pol.lag.slo_seconds
    ):
        # draining at more than the arrival rate, the backlog's age only falls from here
        return x.hold(
            Reason.CATCHING_UP,
            f"backlog of {backlog:,.0f} records drains in {drain:.0f} s at the current "
            f"{model.capacity(current):,.0f} records/s (within {within:.0f} s): "
            "no extra executors needed",
            diagnosis,
            sizing=sizing,
        )
    short = grows and util_needed > pol.utilization.high
    if short and cooling is None and (step := step_in_span(x, model, d, plan)):
        return x.hold(Reason.INSUFFICIENT_DATA, step, diagnosis, sizing=sizing)
    if short and (room := lag_budget_room(x, model, d, plan)):
        return x.hold(Reason.WITHIN_LAG_BUDGET, room, diagnosis, sizing=sizing)
    if short and (hot := hot_key(x, model, diagnosis)):
        return x.hold(Reason.SKEWED, hot, diagnosis, sizing=sizing)
    if grows and util_needed > pol.utilization.high:
        if cooling is not None:
            return x.hold(Reason.COOLDOWN, cooling, diagnosis, sizing=sizing)
        return scale_out(x, model, plan, sizing, diagnosis, util_needed)
    if plan.limit is not None and util_needed > pol.utilization.high:
        if plan.limit[0] is Reason.SOURCE_PARTITION_BOUND and diagnosis.kind is BottleneckKind.NONE:
            # The arrival alone fits, but arrival + backlog does not: the cap binds the catch-up.
            diagnosis = diagnosis.model_copy(
                update={
                    "kind": BottleneckKind.SOURCE_PARTITIONS,
                    "evidence": (
                        *diagnosis.evidence,
                        f"catching up needs {required:,.0f} records/s; the read stage's source "
                        "partitions cap it",
                    ),
                }
            )
        return x.hold(plan.limit[0], plan.limit[1], diagnosis, sizing=sizing)
    if diagnosis.kind is BottleneckKind.MEMORY and (s.failed_tasks or 0) > 0:
        return memory_pressure(x, model, sizing, diagnosis, n_cur)
    shrinks = plan.layout.executors < n_cur or util_arrival < pol.utilization.low
    if not d.backlog_known and shrinks:
        return x.hold(
            Reason.NO_METRICS,
            f"busy {util_arrival:.0%} at {arrival:,.0f} records/s, but the backlog "
            f"{'or its age ' if s.backlog_records else ''}is unknown: holding {n_cur} "
            "(an unknown backlog is never read as none)",
            diagnosis,
            sizing=sizing,
        )
    if plan.layout.executors < n_cur and util_arrival < pol.utilization.low:
        if catching_up:
            return x.hold(
                Reason.CATCHING_UP,
                f"would scale in to {plan.layout.executors}, but a backlog of {backlog:,.0f} "
                f"records ({s.backlog_age_seconds or 0:.0f} s old) is still draining",
                diagnosis,
                sizing=sizing,
            )
        cooling = cooldown(x, growing=False)
        if cooling is not None:
            return x.hold(Reason.COOLDOWN, cooling, diagnosis, sizing=sizing)
        why = f"busy {below(util_arrival, pol.utilization.low)} at {arrival:,.0f} records/s"
        return scale_in(x, plan.layout.executors, n_cur, sizing, diagnosis, why)
    if (
        plan.layout.executors <= math.floor(n_cur * (1.0 - SURPLUS_SHARE))
        and model.utilization(arrival, plan.layout) <= pol.utilization.target
        and not catching_up
    ):
        cooling = cooldown(x, growing=False)
        if cooling is not None:
            return x.hold(Reason.COOLDOWN, cooling, diagnosis, sizing=sizing)
        why = (
            f"{plan.layout.executors} executor(s) carry {arrival:,.0f} records/s at "
            f"{model.utilization(arrival, plan.layout):.0%} busy (target "
            f"{pol.utilization.target:.0%}; {util_arrival:.0%} at {n_cur}): the other "
            f"{n_cur - plan.layout.executors} are a surplus"
        )
        return scale_in(x, plan.layout.executors, n_cur, sizing, diagnosis, why)
    if util_arrival < pol.utilization.low and n_cur > pol.executors.min:
        fewer = Layout(n_cur - 1, current.partitions, restart=False)
        return x.hold(
            Reason.WITHIN_BAND,
            f"busy {below(util_arrival, pol.utilization.low)}, but {n_cur - 1} "
            f"executor(s) would be {model.utilization(required, fewer):.0%} busy (> target "
            f"{pol.utilization.target:.0%}): keeping {n_cur}",
            diagnosis,
            sizing=sizing,
        )
    if util_arrival < pol.utilization.low and n_cur <= pol.executors.min:
        return x.hold(
            Reason.AT_MIN,
            f"busy {below(util_arrival, pol.utilization.low)} but already at "
            f"executors.min={pol.executors.min}",
            diagnosis,
            sizing=sizing,
        )
    return x.hold(
        Reason.WITHIN_BAND,
        f"busy {util_needed:.0%} of the batch budget, within "
        f"[{pol.utilization.low:.0%}, {pol.utilization.high:.0%}] at {n_cur} executor(s)",
        diagnosis,
        sizing=sizing,
    )


def _judged_scale_out(x: Inputs) -> tuple[HistoryEntry, float, float] | None:
    """The last scale-out with the gain in processed rate it delivered and the gain it
    promised, once it has settled and while the job is saturated (its processed rate is then
    its capacity); else None. Scale-ins and recoveries are not judged: their expected rate is
    no promise of a gain."""
    last, s = x.history.last_action(), x.snapshot
    if last is None or last.expected_rate is None or last.rate_before is None:
        return None
    if last.reason not in SCALE_OUT_REASONS:
        return None
    if last.executors is None or s.processed_rate is None:
        return None
    if x.now - last.time < settle_seconds(x, last):
        return None  # the window still holds time from before the action took effect
    saturated = (s.backlog_age_seconds or 0) > x.policy.lag.backlog_tolerance_seconds
    gain_expected = last.expected_rate - last.rate_before
    if not saturated or gain_expected <= 0:
        return None
    return last, s.processed_rate - last.rate_before, gain_expected


def ineffective(x: Inputs) -> HistoryEntry | None:
    """The last scale-out, if it delivered less than ``safety.ineffectiveScaleUpRatio`` of its
    expected gain while saturated. An action is judged once: after its block is recorded, that
    block (scoped and with its end, :meth:`ScalingHistory.blocked`) speaks for it, so a job that
    stays saturated is not blocked anew at every evaluation and the block expires."""
    judged = _judged_scale_out(x)
    if judged is None:
        return None
    last, gain, gain_expected = judged
    if any(e.kind == "blocked" and e.time >= last.time for e in x.history.entries):
        return None
    if gain >= x.policy.safety.ineffective_scale_up_ratio * gain_expected:
        return None
    return HistoryEntry(
        time=x.now,
        kind="blocked",
        executors=last.executors,
        partitions=last.partitions,
        reason=Reason.BLOCKED_INEFFECTIVE.value,
        until=x.now + x.policy.safety.blocked_action_seconds,
    )


def observed_gain_share(x: Inputs) -> float:
    """What the last scale-out delivered of the gain it promised (1 = all of it, or nothing
    judged), never below ``safety.ineffectiveScaleUpRatio`` (below it the move is blocked
    instead, :func:`ineffective`). Sizing credits later gains only this share
    (:attr:`~controller.core.capacity.CapacityModel.gain_share`), so a job still saturated
    after a scale-out that fell short asks for enough at once rather than step by step."""
    judged = _judged_scale_out(x)
    if judged is None:
        return 1.0
    _, gain, gain_expected = judged
    floor = x.policy.safety.ineffective_scale_up_ratio
    return min(1.0, max(floor, gain / gain_expected))


def scale_out(
    x: Inputs,
    model: CapacityModel,
    plan: Plan,
    sizing: Sizing,
    diagnosis: Diagnosis,
    util: float,
) -> Decision:
    pol, n_cur = x.policy, model.current_executors
    target = plan.layout.executors
    partitions = plan.layout.partitions if plan.layout.restart else None
    block = ineffective(x)
    # the new block holds only the kind of move it judged (an in-place scale-out found
    # ineffective never holds the repartition that spreads state over more executors)
    fresh = block if block is not None and block.blocks(x.now, target, partitions) else None
    active = fresh or x.history.blocked(x.now, target, partitions)
    if active is not None:
        return x.hold(
            Reason.BLOCKED_INEFFECTIVE,
            f"scaling to {target} executors did not raise the processed rate as expected; "
            f"blocked until t={active.until or 0:.0f}",
            diagnosis,
            sizing=sizing,
            block=block,
        )
    need = f"need {sizing.required_rate or 0:,.0f} records/s (busy {util:.0%} now)"
    if model.gain_share < 1.0:
        need += (
            f"; the last scale-out delivered {model.gain_share:.0%} of the gain modelled, "
            "so more executors are credited that share"
        )
    if plan.layout.restart and partitions is not None:
        action, reason = Action.REPARTITION, Reason.REPARTITION_OUT
        measured = x.snapshot.last_restart_seconds
        down = f"est. {plan.downtime:.0f} s down" + (
            ", as long as the last restart took"
            if measured is not None and measured >= plan.downtime
            else ""
        )
        holders = model.state_holding_executors()
        if partitions == model.current_partitions and target == n_cur:
            move = (
                f"restart at a batch boundary so state spreads over all {target} executors "
                f"({holders} hold it: executors added in place take no stateful tasks; {down})"
            )
        elif partitions == model.current_partitions:
            move = (
                f"scale out {n_cur} -> {target} executors and restart at a batch boundary so "
                f"state spreads over them ({down})"
            )
        else:
            move = (
                f"repartition state {model.current_partitions} -> {partitions} and run {target} "
                f"executor(s) ({down})"
            )
    else:
        action, reason = Action.SCALE, Reason.SCALE_OUT
        move = f"scale out {n_cur} -> {target} executors"
    note = f"; {plan.limit[1]}" if plan.limit else ""
    cap = (
        admission_cap(x, model, partitions, plan.downtime) if action is Action.REPARTITION else None
    )
    return Decision(
        action=action,
        reason=reason,
        message=f"{move}: {need}; {target} sustain "
        f"{sizing.target_capacity_rate or 0:,.0f} at {pol.utilization.target:.0%}{note}"
        f"{described(cap, x)}",
        target_executors=target,
        target_partitions=partitions,
        max_records_per_batch=cap.records if cap else None,
        enforced=x.enforced,
        diagnosis=diagnosis,
        sizing=sizing,
    )


def memory_pressure(
    x: Inputs, model: CapacityModel, sizing: Sizing, diagnosis: Diagnosis, n_cur: int
) -> Decision:
    """Executor memory is short, tasks fail, and the load asks for no more executors: spread
    the memory in use over enough executors to bring it to the target utilization (``used /
    available`` falls as executors, and their memory, are added), never scale in; at the
    ceiling, say that only more memory per executor (``spark.executor.memory``) helps.

    Only with failed tasks in the window: Spark's executor ``memoryUsed`` is storage memory,
    which it evicts when execution needs room, so a full one alone is a full cache, not
    pressure (the demo showed 91% on one idle executor at 31k records/s). Without failures the
    diagnosis reports it and sizing goes on as for any job."""
    s, pol = x.snapshot, x.policy
    ratio = s.memory_used_ratio or 0.0
    used = (
        f"executor memory {ratio:.0%} in use (> {pol.diagnosis.memory_pressure_ratio:.0%}) "
        f"and {s.failed_tasks} failed task(s)"
    )
    hi = ceiling(x, model)
    want = min(max(math.ceil(n_cur * ratio / pol.utilization.target), n_cur + 1,
                   pol.executors.min), hi)  # fmt: skip
    if want <= n_cur:
        return x.hold(
            Reason.MEMORY_PRESSURE,
            f"{used} at {n_cur} executor(s), the most allowed (executors.max "
            f"{pol.executors.max}): give each executor more memory (spark.executor.memory); "
            "no scale-in meanwhile",
            diagnosis,
            sizing=sizing,
        )
    cooling = cooldown(x, growing=True)
    if cooling is not None:
        return x.hold(Reason.COOLDOWN, cooling, diagnosis, sizing=sizing)
    after = ratio * n_cur / want
    return Decision(
        action=Action.SCALE,
        reason=Reason.SCALE_OUT_MEMORY,
        message=f"scale out {n_cur} -> {want} executors: {used}; about {after:.0%} in use on "
        f"{want} (target {pol.utilization.target:.0%})",
        target_executors=want,
        enforced=x.enforced,
        diagnosis=diagnosis,
        sizing=sizing.model_copy(update={"recommended_executors": want}),
    )


def scale_in(
    x: Inputs, target: int, n_cur: int, sizing: Sizing, diagnosis: Diagnosis, why: str
) -> Decision:
    """Scale in once every recommendation for a whole stabilization window asked for fewer
    executors than run now, in one step to the highest recommendation of that window (HPA's
    stabilization, but only after the dip has lasted a whole window, like Flink's interval),
    leaving out the dip's first ones, measured over a metrics window that still held the load
    before it (``test_engine.py``: "a dip's first recommendation ...")."""
    base = x.policy.timing.scale_down_stabilization_seconds
    flips = x.history.direction_changes_since(x.now - FLIP_MEMORY * base)
    window = base * (1.0 + FLIP_BACKOFF * flips)
    in_window: list[tuple[float, int]] = [(x.now, target)]
    since = x.now
    for e in reversed(x.history.entries):
        if e.kind != "recommendation" or e.executors is None:
            continue
        if e.executors >= n_cur:
            break
        since = e.time
        if e.time >= x.now - window:
            in_window.append((e.time, e.executors))
    # the first recommendations of a dip were measured over a metrics window that still held
    # the load before it: once the dip has lasted longer than a window, only those measured
    # within it count (a 10x step's end recommended 4 from a mixed window, then 2: two
    # scale-ins for one load change)
    settled = [n for t, n in in_window if t - x.policy.timing.window_seconds >= since]
    # within the policy's bounds as they are now: a recommendation recorded under an older
    # policy (a higher executors.max) must not carry a job above today's ceiling
    bounds = x.policy.executors
    highest = min(max(max(settled or [n for _, n in in_window]), bounds.min), bounds.max)
    waited = x.now - since
    weighed = weigh_scale_in(x, n_cur, max(target, bounds.min))
    if weighed is not None:
        pays, said = weighed
        if not pays:
            return x.hold(Reason.SCALE_DOWN_DEFERRED, f"{why}; {said}: keeping {n_cur}",
                          diagnosis, sizing=sizing)  # fmt: skip
        return Decision(
            action=Action.SCALE,
            reason=Reason.SCALE_IN,
            message=f"scale in {n_cur} -> {max(target, bounds.min)} executors: {why}; {said}",
            target_executors=max(target, bounds.min),
            enforced=x.enforced,
            diagnosis=diagnosis,
            sizing=sizing,
        )
    if waited < window:
        grown = f", grown for {flips} recent direction change(s)" if flips else ""
        return x.hold(
            Reason.SCALE_DOWN_DEFERRED,
            f"{why}; fewer executors ({highest}) recommended for {waited:.0f} s of the "
            f"{window:g} s stabilization window{grown}: keeping {n_cur}",
            diagnosis,
            sizing=sizing,
        )
    return Decision(
        action=Action.SCALE,
        reason=Reason.SCALE_IN,
        message=f"scale in {n_cur} -> {highest} executors: {why}, for {waited:.0f} s",
        target_executors=highest,
        enforced=x.enforced,
        diagnosis=diagnosis,
        sizing=sizing,
    )
