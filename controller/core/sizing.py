"""DS2 sizing: the rate the job must carry, and the smallest layout that carries it.

1. :func:`demand`: the required rate is the arrival rate, plus a drain term only when the lag
   budget cannot absorb the backlog. The backlog may wait while ``max(age, backlog / capacity)``
   plus the time new executors take to start (``timing.executorStartupSeconds``) stays under
   ``lag.sloSeconds``; otherwise it is drained within ``min(lag.catchUpSeconds, SLO - startup -
   age)`` (never planned shorter than the startup itself), including what piles up while new
   executors start. An unknown backlog makes the required rate a lower bound: it may justify a
   scale-out, never a scale-in (:mod:`~controller.core.guards`).
2. :func:`plan`: the fewest executors that carry it at ``utilization.target``, in place or with a
   restart that spreads state over the new slots (:mod:`~controller.core.repartition`), within
   :func:`ceiling`. When nothing within bounds is enough, :func:`best_effort` takes the least
   layout worth having and says what binds (driver overhead, source partitions, state
   partitions, executors.max).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from controller.core.capacity import CapacityModel, Layout, sized_layouts
from controller.core.decision import Sizing
from controller.core.diagnosis import source_partitions_needed
from controller.core.inflight import processed_bound
from controller.core.inputs import Inputs
from controller.core.reasons import Reason
from controller.core.repartition import (
    can_restart,
    partitions_for,
    repartition_downtime,
    restart_pays,
    restart_within_budget,
    smallest_restart,
    why_no_restart,
)

WORTHWHILE_SHARE = 0.9
"""When no size reaches the target, take the least one giving this share of the best capacity
(or, where that one would not drain the backlog within ``lag.catchUpSeconds``, of the best one's
surplus over the arrival, :func:`worth_having`): beyond it, each extra executor buys almost
nothing (a partition cap binds)."""


@dataclass(frozen=True)
class Demand:
    """What the job must carry now, at its current layout (records/s, records)."""

    current: Layout
    arrival: float
    backlog: float
    catching_up: bool
    """A backlog older than ``lag.backlogToleranceSeconds`` is draining (no scale-in)."""
    required: float
    """Arrival plus, when the lag budget cannot absorb the backlog, backlog / ``drain_within``."""
    drain_within: float | None = None
    """Seconds the backlog must drain within, or None while the lag budget absorbs it."""
    backlog_known: bool = True
    """False when the backlog or its age is unknown: ``required`` is then a lower bound."""


@dataclass(frozen=True)
class Plan:
    layout: Layout
    downtime: float
    limit: tuple[Reason, str] | None
    """Set when no layout within bounds reaches the target utilization."""


def demand(x: Inputs, model: CapacityModel) -> Demand:
    """The required rate at the current layout: the arrival, and the backlog's drain when the
    lag budget cannot absorb it."""
    s, pol = x.snapshot, x.policy
    current = Layout(model.current_executors, model.current_partitions, restart=False)
    arrival = s.arrival_rate or 0.0
    known = s.backlog_records is not None and (
        s.backlog_records <= 0 or s.backlog_age_seconds is not None
    )
    backlog = s.backlog_records or 0.0
    age = s.backlog_age_seconds or 0.0
    catching_up = age > pol.lag.backlog_tolerance_seconds
    drain_within = lag_budget_drain(x, model, backlog, age) if known else None
    required = arrival
    if drain_within is not None:
        startup = pol.timing.executor_startup_seconds
        # what piles up until new executors run tasks
        grown = backlog + max(0.0, arrival - model.capacity(current)) * startup
        required = arrival + grown / drain_within
    return Demand(current, arrival, backlog, catching_up, required, drain_within, known)


def lag_budget_drain(x: Inputs, model: CapacityModel, backlog: float, age: float) -> float | None:
    """Seconds within which ``backlog`` must drain, or None while the lag budget absorbs it.

    The backlog may wait while ``max(age, backlog / capacity) + startup < SLO``: the current
    executors clear it before the SLO even if new ones were needed. Otherwise it drains within
    ``min(catchUpSeconds, SLO - startup - age)``, not planned shorter than the startup: capacity
    cannot arrive sooner."""
    if backlog <= 0:
        return None
    pol = x.policy
    slo, startup = pol.lag.slo_seconds, pol.timing.executor_startup_seconds
    cap = model.capacity(Layout(model.current_executors, model.current_partitions, False))
    clear = backlog / cap if cap > 0 else math.inf
    if max(age, clear) + startup < slo:
        return None
    return max(min(pol.lag.catch_up_seconds, slo - startup - age), startup, 1e-9)


def sizing_of(x: Inputs, model: CapacityModel, d: Demand, p: Plan) -> Sizing:
    """The numbers behind the recommendation, as reported in the decision."""
    target = x.policy.utilization.target
    return Sizing(
        required_rate=d.required,
        capacity_rate=model.capacity(d.current, target),
        target_capacity_rate=model.capacity(p.layout, target),
        recommended_executors=p.layout.executors,
        recommended_partitions=p.layout.partitions,
        catching_up=d.catching_up,
    )


def drain_seconds(backlog: float, arrival: float, capacity: float) -> float | None:
    """Seconds to drain ``backlog`` at full ``capacity`` while ``arrival`` keeps coming."""
    if capacity <= arrival:
        return None
    return backlog / (capacity - arrival)


def evident_overload(x: Inputs, model: CapacityModel) -> bool:
    """The evidence for a large step is all measured: the arrival (the source's offsets), the
    processed rate below it (the backlog grows; with no batch committed in the window, the
    running batch's records over its age bound it from above,
    :func:`~controller.core.inflight.processed_bound`), and the executors busy past
    ``utilization.high`` at the arrival alone. Then the growth factor does not apply: a 10x step
    sized x4 per action pays two restarts and a minute of lag where one gets there
    (``test_sizing.py::test_an_evident_overload_goes_to_the_needed_size_in_one_action``; a job
    started into a burst: ``test_first_batch.py``)."""
    s = x.snapshot
    processed = processed_bound(s)
    if s.arrival_rate is None or processed is None or s.arrival_rate <= processed:
        return False
    if not (s.backlog_records or 0.0) > 0:
        return False
    now = Layout(model.current_executors, model.current_partitions, restart=False)
    return model.utilization(s.arrival_rate, now) >= x.policy.utilization.high


def ceiling(x: Inputs, model: CapacityModel) -> int:
    """Most executors one action may reach: the policy's max and, unless the overload is
    evident (:func:`evident_overload`), the growth factor."""
    pol = x.policy
    if evident_overload(x, model):
        return max(pol.executors.max, pol.executors.min)
    grow = math.ceil(max(model.current_executors, 1) * pol.safety.max_scale_up_factor)
    return max(min(pol.executors.max, grow), pol.executors.min)


def plan(x: Inputs, model: CapacityModel, required: float, arrival: float) -> Plan:
    """The smallest layout that carries ``required`` at the target utilization (a restart also
    catches up on what piles up while it is down, :func:`~.repartition.smallest_restart`)."""
    pol = x.policy
    lo, hi = pol.executors.min, ceiling(x, model)
    target = pol.utilization.target
    cur_p = model.current_partitions

    candidates = [Layout(n, cur_p, restart=False) for n in range(max(lo, 1), hi + 1)]
    sized = sized_layouts(model, required, candidates, target, pol.utilization.high)
    in_place = sized[0] if sized else None

    restart = None
    downtime = repartition_downtime(x)
    possible = can_restart(x, model, downtime)
    # a restart never helps the fixed driver time: no repartition for it (a longer trigger does)
    overhead_bound = model.overhead_share_of_batch() > pol.diagnosis.overhead_share
    if restart_within_budget(x, possible, downtime) and downtime is not None and not overhead_bound:
        restart = smallest_restart(x, model, required, arrival, lo, hi, downtime)

    if in_place is not None and (restart is None or in_place.executors <= restart.executors):
        return Plan(in_place, 0.0, None)
    if restart is not None and downtime is not None:
        if in_place is None or restart_pays(x, in_place.executors - restart.executors, downtime):
            return Plan(restart, downtime, None)
        return Plan(in_place or restart, 0.0, None)
    if in_place is not None:
        return Plan(in_place, 0.0, None)
    return best_effort(x, model, required, arrival, possible, downtime)


def worth_having(
    x: Inputs, model: CapacityModel, options: list[Layout], arrival: float, downtime: float | None
) -> Layout:
    """The least of ``options`` worth having: the fewest executors giving
    :data:`WORTHWHILE_SHARE` of the best capacity, unless that layout's surplus over the arrival
    cannot drain what waits (the backlog, and for a restart what piles up while it is down)
    within ``lag.catchUpSeconds``: then the fewest of those giving that share that can, or
    where none can, the fewest giving that share of the best one's surplus (where no layout
    sustains the arrival, the share of the capacity rules: there is no surplus). Near the arrival a
    share of the capacity is no rule: at 108,500 records/s arriving, 16 executors carrying
    112,000 are 90% of 20 carrying 122,500 and drain at a quarter of their rate. The job's
    current layout, when it is the fewest, stays: a restart for a sliver of surplus piles up
    more than the sliver drains (``tests/unit/simulator/test_unseen_loads.py::
    test_a_step_just_under_what_the_source_reads_gets_the_surplus_that_drains_it``,
    ``::test_a_ramp_past_what_the_source_reads_is_not_restarted_for_a_sliver_of_surplus``)."""
    waiting = max(x.snapshot.backlog_records or 0.0, 0.0)
    within = x.policy.lag.catch_up_seconds
    caps = {o: model.capacity(o) for o in options}
    best = max(caps.values())
    least = sorted((o for o in options if caps[o] >= WORTHWHILE_SHARE * best),
                   key=lambda o: (o.executors, o.restart))

    def drains(o: Layout) -> bool:
        piled = waiting + (arrival * downtime if o.restart and downtime else 0.0)
        return caps[o] > arrival and piled <= within * (caps[o] - arrival)

    current = Layout(model.current_executors, model.current_partitions, restart=False)
    if least[0] == current or best <= arrival:
        return least[0]
    surplus = WORTHWHILE_SHARE * (best - arrival)
    draining = [o for o in least if drains(o)]
    return (draining or [o for o in least if caps[o] - arrival >= surplus])[0]


def best_effort(
    x: Inputs,
    model: CapacityModel,
    required: float,
    arrival: float,
    possible: bool,
    downtime: float | None,
) -> Plan:
    """Nothing within bounds is enough: the least layout worth having (:func:`worth_having`),
    and why."""
    pol = x.policy
    lo, hi = max(pol.executors.min, 1), ceiling(x, model)
    options = [Layout(n, model.current_partitions, False) for n in range(lo, hi + 1)]
    overhead_bound = model.overhead_share_of_batch() > pol.diagnosis.overhead_share
    if restart_within_budget(x, possible, downtime) and not overhead_bound:
        options += [Layout(n, partitions_for(x, model, n), True) for n in range(lo, hi + 1)]
    chosen = worth_having(x, model, options, arrival, downtime)
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
    elif stage.kind == "stateful" and not possible:  # in place, executors never widen it
        limit = (
            Reason.PARTITION_BOUND_NO_REPARTITION,
            f"stateful stage {stage.name} is capped at {model.current_partitions} partitions and "
            f"{why_no_restart(x, downtime)}",
        )
    else:
        limit = (
            Reason.AT_MAX,
            f"{required:,.0f} records/s needs more than {hi} executors (max "
            f"{pol.executors.max}"
            + ("" if hi >= pol.executors.max
               else f", growth x{pol.safety.max_scale_up_factor:g} per action")
            + f") "
            f"({cap:,.0f} records/s at target utilization)",
        )
    return Plan(chosen, downtime if chosen.restart and downtime else 0.0, limit)
