"""``decide(snapshot, policy, history, now) -> Decision``: the pure decision engine.

The pipeline, in order (each step may end in a hold that says why):

1. failure: the driver is down or stalled -> recover from the checkpoint, sized to catch up;
2. data: no, stale or too few metrics -> hold (unknown is never zero);
3. sizing (DS2): the required rate is arrival + backlog / catch-up time; the smallest layout
   (executors, state partitions) that carries it at the target utilization, in place or with a
   restart that spreads state over the new slots (the SEEP move);
4. the band: act only outside [low, high]; scale in only to the highest recommendation over the
   stabilization window, never while catching up; cooldown after an action; moves that did not
   help before stay blocked (Dhalion's blacklist).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from contracts.history import HistoryEntry, ScalingHistory
from contracts.policy import ScalingPolicySpec
from controller.core.capacity import CapacityModel, Layout
from controller.core.decision import Decision, Diagnosis, Sizing
from controller.core.diagnosis import diagnose, failure_evidence, source_partitions_needed
from controller.core.reasons import Action, BottleneckKind, Reason
from controller.core.snapshot import MetricsSnapshot

_RESTARTING_ACTIONS = (Action.REPARTITION.value, Action.RECOVER.value)

_WORTHWHILE_SHARE = 0.9
"""When no size reaches the target, take the least one giving this share of the best capacity:
beyond it, each extra executor buys almost nothing (a partition cap binds)."""


@dataclass(frozen=True)
class _Inputs:
    snapshot: MetricsSnapshot
    policy: ScalingPolicySpec
    history: ScalingHistory
    now: float

    @property
    def enforced(self) -> bool:
        return self.policy.mode == "enforce"

    def hold(
        self, reason: Reason, message: str, diagnosis: Diagnosis | None = None, **kw: object
    ) -> Decision:
        return Decision(
            action=Action.HOLD,
            reason=reason,
            message=message,
            enforced=self.enforced,
            diagnosis=diagnosis or Diagnosis(),
            **kw,
        )


def decide(
    snapshot: MetricsSnapshot, policy: ScalingPolicySpec, history: ScalingHistory, now: float
) -> Decision:
    """What the job should run with now, and why. Pure: same inputs, same decision."""
    x = _Inputs(snapshot, policy, history, now)
    in_flight = _restart_in_flight(x)
    if in_flight is not None:
        return in_flight
    if failure_evidence(snapshot, policy):
        return _recover(x)
    problem = _data_problem(x)
    if problem is not None:
        return problem
    model = CapacityModel.from_snapshot(snapshot)
    diagnosis = diagnose(snapshot, model, policy)
    if model is None:
        return _without_model(x, diagnosis)
    return _resize(x, model, diagnosis)


# -- steps ----------------------------------------------------------------------------------


def _restart_in_flight(x: _Inputs) -> Decision | None:
    """A repartition or recovery has not yet produced a batch at its new layout: wait for it.

    Done means a batch committed after the restart (no sooner than half the expected restart
    time, so the batch that was in flight when the job stopped does not count) and, for a
    repartition, the stateful stage reporting the new partition count. Without the latter the
    window still describes the old layout and sizing on it would repeat the move.
    """
    last = x.history.last_action()
    if last is None or last.action not in _RESTARTING_ACTIONS:
        return None
    s, p = x.snapshot, x.policy.partitions
    budget = p.max_downtime_seconds + x.policy.timing.cooldown_seconds
    elapsed = x.now - last.time
    if elapsed >= budget:
        return None
    if s.driver_up is False and last.action != Action.RECOVER.value:
        return None  # a repartition keeps the runner up: a dead driver now is a new failure
    committed_after = (
        s.seconds_since_progress is not None
        and s.seconds_since_progress < elapsed - p.restart_seconds / 2
    )
    stateful = s.stateful_stage()
    new_layout_seen = (
        last.partitions is None or stateful is None or stateful.partitions == last.partitions
    )
    if committed_after and new_layout_seen:
        return None
    waiting = (
        "the first committed batch"
        if not committed_after
        else (f"a batch at {last.partitions} state partitions")
    )
    return x.hold(
        Reason.ACTION_IN_PROGRESS,
        f"{last.action} started {elapsed:.0f} s ago ({last.reason}); waiting up to "
        f"{budget:.0f} s for {waiting}",
    )


def _data_problem(x: _Inputs) -> Decision | None:
    s, t = x.snapshot, x.policy.timing
    if s.observed_at is None:
        why = f" ({s.unavailable})" if s.unavailable else ""
        return x.hold(Reason.NO_METRICS, f"no metrics for this job{why}: holding the current size")
    age = x.now - s.observed_at
    if age > t.stale_after_seconds:
        return x.hold(
            Reason.STALE_METRICS,
            f"newest metrics are {age:.0f} s old (stale after {t.stale_after_seconds:g} s): "
            "holding the current size",
        )
    missing = [
        name
        for name, value in (("executors", s.executors), ("arrival rate", s.arrival_rate))
        if value is None
    ]
    if missing:
        return x.hold(
            Reason.NO_METRICS, f"unknown {' and '.join(missing)}: holding the current size"
        )
    if s.batches is not None and s.batches < t.min_batches and (s.arrival_rate or 0) > 0:
        return x.hold(
            Reason.INSUFFICIENT_DATA,
            f"{s.batches} batch(es) in the window, need {t.min_batches} to size the job",
        )
    return None


def _without_model(x: _Inputs, diagnosis: Diagnosis) -> Decision:
    """No cost measurements: an idle job may shrink to the minimum, anything else holds."""
    s = x.snapshot
    idle = (s.arrival_rate or 0) == 0 and (s.backlog_records or 0) == 0
    if not idle or s.executors is None:
        return x.hold(
            Reason.INSUFFICIENT_DATA,
            "no per-record cost measured yet (no processed records with busy time)",
            diagnosis,
        )
    target = x.policy.executors.min
    sizing = Sizing(required_rate=0.0, recommended_executors=target)
    return _scale_in(x, target, s.executors, sizing, diagnosis, "the job is idle")


def _resize(x: _Inputs, model: CapacityModel, diagnosis: Diagnosis) -> Decision:
    s, pol = x.snapshot, x.policy
    current = Layout(model.current_executors, model.current_partitions, restart=False)
    backlog = s.backlog_records or 0.0
    catching_up = (s.backlog_age_seconds or 0.0) > pol.lag.backlog_tolerance_seconds
    arrival = s.arrival_rate or 0.0
    required = arrival + (backlog / pol.lag.catch_up_seconds if catching_up else 0.0)
    now_cap = model.capacity(current)
    if required > now_cap:
        # backlog that keeps growing until new executors run tasks
        required += (
            (arrival - now_cap) * pol.timing.executor_startup_seconds / (pol.lag.catch_up_seconds)
        )
    plan = _plan(x, model, required, arrival)
    sizing = Sizing(
        required_rate=required,
        capacity_rate=model.capacity(current, pol.utilization.target),
        target_capacity_rate=model.capacity(plan.layout, pol.utilization.target),
        recommended_executors=plan.layout.executors,
        recommended_partitions=plan.layout.partitions,
        catching_up=catching_up,
    )
    util_needed = model.utilization(required, current)
    util_arrival = model.utilization(arrival, current)
    n_cur = current.executors
    grows = plan.layout.executors > n_cur or (
        plan.layout.restart and plan.layout.partitions != current.partitions
    )

    cooldown = _cooldown(x)
    drain = _drain_seconds(backlog, arrival, model.capacity(current))
    if (
        grows
        and catching_up
        and util_arrival <= pol.utilization.high
        and drain is not None
        and drain <= pol.lag.catch_up_seconds
        and (s.backlog_age_seconds or 0.0) < pol.lag.slo_seconds
    ):
        # draining at more than the arrival rate, the backlog's age only falls from here
        return x.hold(
            Reason.CATCHING_UP,
            f"backlog of {backlog:,.0f} records drains in {drain:.0f} s at the current "
            f"{model.capacity(current):,.0f} records/s (catch-up {pol.lag.catch_up_seconds:g} s): "
            "no extra executors needed",
            diagnosis,
            sizing=sizing,
        )
    if grows and util_needed > pol.utilization.high:
        if cooldown is not None:
            return x.hold(Reason.COOLDOWN, cooldown, diagnosis, sizing=sizing)
        return _scale_out(x, model, plan, sizing, diagnosis, util_needed)
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
    if plan.layout.executors < n_cur and util_arrival < pol.utilization.low:
        if catching_up:
            return x.hold(
                Reason.CATCHING_UP,
                f"would scale in to {plan.layout.executors}, but a backlog of {backlog:,.0f} "
                f"records ({s.backlog_age_seconds or 0:.0f} s old) is still draining",
                diagnosis,
                sizing=sizing,
            )
        if cooldown is not None:
            return x.hold(Reason.COOLDOWN, cooldown, diagnosis, sizing=sizing)
        why = f"busy {util_arrival:.0%} (< {pol.utilization.low:.0%}) at {arrival:,.0f} records/s"
        return _scale_in(x, plan.layout.executors, n_cur, sizing, diagnosis, why)
    if util_arrival < pol.utilization.low and n_cur > pol.executors.min:
        fewer = Layout(n_cur - 1, current.partitions, restart=False)
        return x.hold(
            Reason.WITHIN_BAND,
            f"busy {util_arrival:.0%} (< {pol.utilization.low:.0%}), but {n_cur - 1} "
            f"executor(s) would be {model.utilization(required, fewer):.0%} busy (> target "
            f"{pol.utilization.target:.0%}): keeping {n_cur}",
            diagnosis,
            sizing=sizing,
        )
    if util_arrival < pol.utilization.low and n_cur <= pol.executors.min:
        return x.hold(
            Reason.AT_MIN,
            f"busy {util_arrival:.0%} (< {pol.utilization.low:.0%}) but already at "
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


# -- sizing ---------------------------------------------------------------------------------


def _drain_seconds(backlog: float, arrival: float, capacity: float) -> float | None:
    """Seconds to drain ``backlog`` at full ``capacity`` while ``arrival`` keeps coming."""
    if capacity <= arrival:
        return None
    return backlog / (capacity - arrival)


@dataclass(frozen=True)
class _Plan:
    layout: Layout
    downtime: float
    limit: tuple[Reason, str] | None
    """Set when no layout within bounds reaches the target utilization."""


def _partitions_for(x: _Inputs, model: CapacityModel, executors: int) -> int | None:
    """State partitions after a restart at ``executors``: the current count if it already gives
    every slot a partition (then the restart only re-spreads state), else per_slot per slot."""
    p = x.policy.partitions
    cur = model.current_partitions
    if cur is None:
        return None
    slots = executors * model.cores_per_executor
    if cur >= slots:
        return cur
    return min(max(slots * p.per_slot, p.min), p.max)


def _repartition_downtime(x: _Inputs) -> float | None:
    state = x.snapshot.state_bytes()
    if state is None:
        return None
    p = x.policy.partitions
    return p.restart_seconds + state / p.repartition_bytes_per_second


def _plan(x: _Inputs, model: CapacityModel, required: float, arrival: float) -> _Plan:
    """The smallest layout that carries ``required`` at the target utilization."""
    pol = x.policy
    lo, hi = pol.executors.min, _ceiling(x, model)
    target = pol.utilization.target
    cur_p = model.current_partitions

    in_place = None
    for n in range(max(lo, 1), hi + 1):
        lay = Layout(n, cur_p, restart=False)
        if model.utilization(required, lay) <= target:
            in_place = lay
            break

    restart = None
    downtime = _repartition_downtime(x)
    can_restart = cur_p is not None and pol.partitions.repartition and downtime is not None
    if can_restart and downtime is not None and downtime <= pol.partitions.max_downtime_seconds:
        extra = arrival * downtime / pol.lag.catch_up_seconds
        for n in range(max(lo, 1), hi + 1):
            lay = Layout(n, _partitions_for(x, model, n), restart=True)
            if model.utilization(required + extra, lay) <= target:
                restart = lay
                break

    if in_place is not None and (restart is None or in_place.executors <= restart.executors):
        return _Plan(in_place, 0.0, None)
    if restart is not None and downtime is not None:
        if in_place is None or _restart_pays(x, in_place.executors - restart.executors, downtime):
            return _Plan(restart, downtime, None)
        return _Plan(in_place or restart, 0.0, None)
    if in_place is not None:
        return _Plan(in_place, 0.0, None)
    return _best_effort(x, model, required, can_restart, downtime)


def _ceiling(x: _Inputs, model: CapacityModel) -> int:
    """Most executors one action may reach: the policy's max and the growth factor."""
    grow = math.ceil(max(model.current_executors, 1) * x.policy.safety.max_scale_up_factor)
    return max(min(x.policy.executors.max, grow), x.policy.executors.min)


def _restart_pays(x: _Inputs, saved_executors: int, downtime: float) -> bool:
    """A repartition that saves executors pays if the saving over the stabilization window
    exceeds the executor time lost while the job is down."""
    horizon = max(x.policy.timing.scale_down_stabilization_seconds, downtime)
    return saved_executors * horizon > downtime * x.policy.executors.max


def _best_effort(
    x: _Inputs, model: CapacityModel, required: float, can_restart: bool, downtime: float | None
) -> _Plan:
    """Nothing within bounds is enough: the least layout reaching the best capacity, and why."""
    pol = x.policy
    lo, hi = max(pol.executors.min, 1), _ceiling(x, model)
    options = [Layout(n, model.current_partitions, False) for n in range(lo, hi + 1)]
    if can_restart and downtime is not None and downtime <= pol.partitions.max_downtime_seconds:
        options += [Layout(n, _partitions_for(x, model, n), True) for n in range(lo, hi + 1)]
    best = max(model.capacity(o) for o in options)
    chosen = min(
        (o for o in options if model.capacity(o) >= _WORTHWHILE_SHARE * best),
        key=lambda o: (o.executors, o.restart),
    )
    if model.overhead_share_of_batch() >= pol.utilization.high:
        chosen = Layout(model.current_executors, model.current_partitions, restart=False)
    cap = model.capacity(chosen, pol.utilization.target)
    stage = model.binding_stage(chosen)
    if model.overhead_share_of_batch() >= pol.utilization.high:
        limit = (
            Reason.DRIVER_OVERHEAD_BOUND,
            f"fixed per-batch driver time ({model.overhead_seconds:.2f} s) alone uses "
            f"{model.overhead_share_of_batch():.0%} of each batch at a "
            f"{model.interval_seconds:g} s trigger: executors cannot help; use a longer trigger",
        )
    elif stage.kind == "source" and stage.partitions is not None and chosen.executors < hi:
        needed = source_partitions_needed(model, required, pol)
        fix = (
            f"set the Kafka source's minPartitions to {needed[0]} (or give the topic "
            f"{needed[0]} partitions) and run {needed[1]} executor(s)"
            if needed
            else f"raise the source's partitions (Kafka minPartitions); even "
            f"{pol.executors.max * model.cores_per_executor} would not carry it within "
            f"executors.max={pol.executors.max}"
        )
        limit = (
            Reason.SOURCE_PARTITION_BOUND,
            f"the read stage is capped at {stage.partitions} source partition(s) "
            f"({cap:,.0f} records/s at target utilization, {required:,.0f} needed): more "
            f"executors cannot help; {fix}",
        )
    elif stage.kind == "stateful" and not can_restart and chosen.executors < hi:
        why = (
            "repartition is disabled"
            if not pol.partitions.repartition
            else "state size is unknown"
            if downtime is None
            else f"its downtime ({downtime:.0f} s) exceeds maxDowntimeSeconds"
        )
        limit = (
            Reason.PARTITION_BOUND_NO_REPARTITION,
            f"stateful stage {stage.name} is capped at {model.current_partitions} partitions and "
            f"{why}",
        )
    else:
        limit = (
            Reason.AT_MAX,
            f"{required:,.0f} records/s needs more than {hi} executors (max "
            f"{pol.executors.max}, growth x{pol.safety.max_scale_up_factor:g} per action) "
            f"({cap:,.0f} records/s at target utilization)",
        )
    return _Plan(chosen, downtime if chosen.restart and downtime else 0.0, limit)


# -- actions --------------------------------------------------------------------------------


def _cooldown(x: _Inputs) -> str | None:
    last = x.history.last_action()
    if last is None:
        return None
    elapsed = x.now - last.time
    cd = x.policy.timing.cooldown_seconds
    if elapsed < cd:
        return f"last action ({last.reason}) {elapsed:.0f} s ago; cooldown {cd:g} s"
    return None


def _ineffective(x: _Inputs) -> HistoryEntry | None:
    """The last scale-out, if it delivered too little of its expected gain while saturated."""
    last, s = x.history.last_action(), x.snapshot
    if last is None or last.expected_rate is None or last.rate_before is None:
        return None
    if last.executors is None or s.processed_rate is None:
        return None
    t = x.policy.timing
    settle = t.cooldown_seconds + t.executor_startup_seconds + t.window_seconds
    if last.action in _RESTARTING_ACTIONS:
        settle += x.policy.partitions.max_downtime_seconds
    if x.now - last.time < settle:
        return None  # the window still holds time from before the action took effect
    saturated = (s.backlog_age_seconds or 0) > x.policy.lag.backlog_tolerance_seconds
    gain_expected = last.expected_rate - last.rate_before
    if not saturated or gain_expected <= 0:
        return None
    gain = s.processed_rate - last.rate_before
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


def _scale_out(
    x: _Inputs,
    model: CapacityModel,
    plan: _Plan,
    sizing: Sizing,
    diagnosis: Diagnosis,
    util: float,
) -> Decision:
    pol, n_cur = x.policy, model.current_executors
    target = plan.layout.executors
    partitions = plan.layout.partitions if plan.layout.restart else None
    block = _ineffective(x)
    active = block or x.history.blocked(x.now, target, partitions)
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
    if plan.layout.restart and partitions is not None:
        action, reason = Action.REPARTITION, Reason.REPARTITION_OUT
        if partitions == model.current_partitions:
            move = (
                f"scale out {n_cur} -> {target} executors and restart at a batch boundary so "
                f"state spreads over them (est. {plan.downtime:.0f} s down)"
            )
        else:
            move = (
                f"repartition state {model.current_partitions} -> {partitions} and run {target} "
                f"executor(s) (est. {plan.downtime:.0f} s down)"
            )
    else:
        action, reason = Action.SCALE, Reason.SCALE_OUT
        move = f"scale out {n_cur} -> {target} executors"
    note = f"; {plan.limit[1]}" if plan.limit else ""
    return Decision(
        action=action,
        reason=reason,
        message=f"{move}: {need}; {target} sustain "
        f"{sizing.target_capacity_rate or 0:,.0f} at {pol.utilization.target:.0%}{note}",
        target_executors=target,
        target_partitions=partitions,
        enforced=x.enforced,
        diagnosis=diagnosis,
        sizing=sizing,
    )


def _scale_in(
    x: _Inputs, target: int, n_cur: int, sizing: Sizing, diagnosis: Diagnosis, why: str
) -> Decision:
    """Scale in once every recommendation for a whole stabilization window asked for fewer
    executors than run now, in one step to the highest recommendation of that window (HPA's
    stabilization, but only after the dip has lasted a whole window, like Flink's interval)."""
    window = x.policy.timing.scale_down_stabilization_seconds
    in_window: list[int] = [target]
    since = x.now
    for e in reversed(x.history.entries):
        if e.kind != "recommendation" or e.executors is None:
            continue
        if e.executors >= n_cur:
            break
        since = e.time
        if e.time >= x.now - window:
            in_window.append(e.executors)
    highest = max(max(in_window), x.policy.executors.min)
    waited = x.now - since
    if waited < window:
        return x.hold(
            Reason.SCALE_DOWN_DEFERRED,
            f"{why}; fewer executors ({highest}) recommended for {waited:.0f} s of the "
            f"{window:g} s stabilization window: keeping {n_cur}",
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


def _recover(x: _Inputs) -> Decision:
    """Recovery as scale-out: restart from the checkpoint with enough capacity to catch up."""
    s, pol = x.snapshot, x.policy
    evidence = failure_evidence(s, pol)
    diagnosis = Diagnosis(kind=BottleneckKind.FAILURE, evidence=tuple(evidence))
    known = [e for e in x.history.entries if e.expected_rate and e.executors]
    fallback = s.target_executors or s.executors or pol.executors.initial or pol.executors.min
    n = max(fallback, pol.executors.min, 1)
    note = "no measured capacity yet: restarting at the last size"
    required = None
    if known and s.arrival_rate is not None:
        last = known[-1]
        per_exec = (last.expected_rate or 0) / (last.executors or 1)
        outage = s.seconds_since_progress or 0.0
        backlog = (s.backlog_records or s.arrival_rate * outage) + (
            s.arrival_rate * pol.partitions.restart_seconds
        )
        required = s.arrival_rate + backlog / pol.lag.catch_up_seconds
        n = max(pol.executors.min, 1, math.ceil(required / per_exec))
        note = (
            f"need {required:,.0f} records/s to drain {backlog:,.0f} records within "
            f"{pol.lag.catch_up_seconds:g} s"
        )
    n = min(n, pol.executors.max)
    partitions = None
    cur_p = next((st.partitions for st in s.stages if st.kind == "stateful"), None)
    if cur_p is None:
        cur_p = next((e.partitions for e in reversed(x.history.entries) if e.partitions), None)
    if cur_p is not None and pol.partitions.repartition:
        want = min(
            max(n * (s.cores_per_executor or 1) * pol.partitions.per_slot, pol.partitions.min),
            pol.partitions.max,
        )
        partitions = want if want > cur_p else None
    return Decision(
        action=Action.RECOVER,
        reason=Reason.RECOVER_FAILURE,
        message=f"{'; '.join(evidence)}: restart from the latest checkpoint with {n} "
        f"executor(s){f' and {partitions} state partitions' if partitions else ''}; {note}",
        target_executors=n,
        target_partitions=partitions,
        enforced=x.enforced,
        diagnosis=diagnosis,
        sizing=Sizing(required_rate=required, recommended_executors=n, catching_up=True),
    )
