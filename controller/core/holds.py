"""Why a scale-out the sizing asks for can wait: the lag budget takes the load one more
evaluation (or the job keeps up and a restart for headroom only stops it), a step the measured
arrival rate still averages in, or a hot key that more executors would not shorten.
:func:`~controller.core.guards.band` asks these before it scales out; each answer is the
reason's message."""

from __future__ import annotations

from controller.core.capacity import CapacityModel
from controller.core.decision import Diagnosis
from controller.core.inputs import Inputs
from controller.core.reasons import BottleneckKind
from controller.core.sizing import Demand, Plan


def lag_budget_room(x: Inputs, model: CapacityModel, d: Demand, plan: Plan) -> str | None:
    """Why the lag budget can take the load one more evaluation, or None.

    A scale-out decided one evaluation later still lands in time when the lag it would then
    peak at stays under the SLO. Until new capacity runs tasks (evaluation interval + executor
    startup; for a restart the evaluation interval at the current rate, then its downtime with
    nothing processed) the lag, now ``max(age, backlog / capacity)``, grows and records pile up;
    the first batch on the new layout then holds all of them, and the oldest waits for it. A
    burst that ends before then costs no action at all; one that lasts is sized at the next
    evaluation. Never with a backlog that must already drain, or an unknown one.

    A restart for a job that keeps up (the arrival within what its executors process at full
    use, its backlog no older than ``lag.backlogToleranceSeconds``) waits too, whatever the
    restart's own downtime would add: nothing piles up while it waits, so a restart one
    evaluation later peaks no higher than one now, and a load that only brushed
    ``utilization.high`` (a noisy plateau: 8 executors 94% busy for one window, restarted to 16
    for good) costs no restart at all (``test_engine.py``, "keeps up")."""
    s, pol = x.snapshot, x.policy
    if d.drain_within is not None or not d.backlog_known or s.backlog_age_seconds is None:
        return None
    cap, new_cap = model.capacity(d.current), model.capacity(plan.layout)
    if cap <= 0 or new_cap <= 0:
        return None
    lag = max(s.backlog_age_seconds, d.backlog / cap)
    excess = max(0.0, d.arrival - cap)
    wait = pol.timing.evaluation_interval_seconds
    if plan.layout.restart and excess <= 0 and lag <= pol.lag.backlog_tolerance_seconds:
        return (
            f"{d.arrival:,.0f} records/s on {d.current.executors} executor(s) "
            f"({model.utilization(d.arrival, d.current):.0%} busy) asks for a restart to "
            f"{plan.layout.executors}, but they keep up ({cap:,.0f} records/s at full use, the "
            f"lag {lag:.0f} s): a restart later stops the job no longer than one now, and "
            "nothing piles up meanwhile: holding"
        )
    if plan.layout.restart:
        late = lag + excess / cap * wait + plan.downtime
        piled = d.backlog + excess * wait + d.arrival * plan.downtime
    else:
        reaction = wait + pol.timing.executor_startup_seconds
        late = lag + excess / cap * reaction
        piled = d.backlog + excess * reaction
    peak = late + piled / new_cap
    if peak >= pol.lag.slo_seconds:
        return None
    asks = f"{plan.layout.executors}"
    if plan.layout.executors == d.current.executors:
        asks = f"a restart that spreads state over all {asks}"
    return (
        f"{d.arrival:,.0f} records/s on {d.current.executors} executor(s) ({cap:,.0f} records/s "
        f"at full use) asks for {asks}, but the lag ({lag:.0f} s now) would "
        f"peak at {peak:.0f} s even if that came one evaluation later (SLO "
        f"{pol.lag.slo_seconds:g} s): holding while the lag budget takes it"
    )


STEP_IN_SPAN_FACTOR = 1.5
"""A young backlog that arrived at least this many times faster than the measured arrival rate
is a step the rate's span still averages in. Measured noise (7-12%) and the fastest sines of
the unseen loads (``make bench-unseen``) stay below it."""
STEP_MIN_AGE_SECONDS = 1.0
"""A backlog younger than this gives no rate: its age is within a batch's planning jitter."""


def step_in_span(x: Inputs, model: CapacityModel, d: Demand, plan: Plan) -> str | None:
    """Why the arrival rate is not yet a measure to size on, or None.

    The arrival rate is the source's growth over its last seconds; the backlog is all of what
    arrived since its oldest record. A young backlog (``STEP_MIN_AGE_SECONDS`` to
    ``lag.backlogToleranceSeconds`` old) that arrived :data:`STEP_IN_SPAN_FACTOR` times faster
    than the rate says a step happened inside the rate's span: the rate still averages in the
    load before it, and the backlog's own rate covers too short a time to hold the new load's
    level. A restart sized on either is followed by a second one (a 10x step one second before
    an evaluation: 2 -> 4, then 4 -> 16 twenty seconds later, 96 s over the SLO; sized on the
    backlog's rate 2 -> 11, then 11 -> 16, 255 s). One evaluation later the rate covers only the
    new load. Only where it matters and the wait is cheap: the layout sized on the measured rate
    would be past ``utilization.high`` at the backlog's rate (a layout that carries even that
    goes now: waiting only piles up a catch-up, sized larger than the load), and the lag budget
    absorbs the backlog itself (no drain term: a pile that must drain now is sized now, on what
    it holds) (``test_holds.py``, "a step inside the arrival's span")."""
    s, pol = x.snapshot, x.policy
    measured, backlog, age = s.arrival_rate or 0.0, s.backlog_records, s.backlog_age_seconds
    if not backlog or age is None or d.drain_within is not None:
        return None
    if not STEP_MIN_AGE_SECONDS <= age <= pol.lag.backlog_tolerance_seconds:
        return None
    recent = backlog / age
    if recent < STEP_IN_SPAN_FACTOR * measured:
        return None
    if model.utilization(recent, plan.layout) <= pol.utilization.high:
        return None
    return (
        f"{recent:,.0f} records/s arrived over the backlog's last {age:.1f} s against a "
        f"measured {measured:,.0f} records/s: a step the measured rate still averages in, and "
        f"{plan.layout.executors} executor(s) sized on it would be "
        f"{model.utilization(recent, plan.layout):.0%} busy at the backlog's rate; sizing at "
        f"the next evaluation, on a rate that covers only the new load (the lag is {age:.1f} s)"
    )


def hot_key(x: Inputs, model: CapacityModel, diagnosis: Diagnosis) -> str | None:
    """Why more executors would not help a skewed stage, or None.

    A batch lasts at least as long as its longest task. When the skewed stage's tasks already
    run in one wave (no more tasks than slots), more slots cannot shorten that task: the hot key
    stays on one task, and a repartition keeps it on one partition. With several waves, more
    slots still help and the scale-out goes ahead with the skew in its evidence."""
    if diagnosis.kind is not BottleneckKind.SKEW or diagnosis.operator is None:
        return None
    stage = next((st for st in x.snapshot.stages if st.name == diagnosis.operator), None)
    if stage is None or not stage.max_task_seconds or not stage.median_task_seconds:
        return None
    slots = model.current_executors * model.cores_per_executor
    tasks = stage.partitions
    if tasks is None or tasks > slots:
        return None
    ratio = stage.max_task_seconds / stage.median_task_seconds
    return (
        f"stage {stage.name}: its longest task takes {ratio:.1f}x the median "
        f"({stage.max_task_seconds:.2f} s), and its {tasks} task(s) already run in one wave on "
        f"{slots} slot(s): a hot key, which more executors or partitions do not shorten; holding "
        f"{model.current_executors} (spread the key, e.g. salt it, or raise the trigger)"
    )
