"""Why a scale-out the sizing asks for can wait: the lag budget takes the load one more
evaluation (or the job keeps up and a restart for headroom only stops it), or a hot key that
more executors would not shorten. :func:`~controller.core.guards.band` asks these before it
scales out; each answer is the reason's message."""

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
