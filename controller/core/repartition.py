"""The restart move: state partitions after a restart, what the restart costs, when it pays.

A restart stops the query at a batch boundary and resumes it from the checkpoint with the state
spread over a new number of partitions (the SEEP move). It is the only way executors added to a
stateful stage get state to work on, but the job is down meanwhile: ``downtime`` is the policy's
fixed restart time plus the state moved at ``repartitionBytesPerSecond``, or what the runner
measured its last restart took when that was longer.
"""

from __future__ import annotations

from controller.core.capacity import CapacityModel, Layout, sized_layouts
from controller.core.inputs import Inputs


def partitions_for(x: Inputs, model: CapacityModel, executors: int) -> int | None:
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


def repartition_downtime(x: Inputs) -> float | None:
    """Seconds the job is down for a restart; None when the state size is unknown.

    The policy's estimate (``restartSeconds`` + state / ``repartitionBytesPerSecond``), or how
    long the runner measured its last restart took (``last_restart_seconds``: the wait for a
    batch boundary, the stop, the state moved, the start) when that was longer: the demo's took
    28-67 s against a 10 s estimate. Never shorter than the estimate (the state may have grown
    since)."""
    s = x.snapshot
    state = s.state_bytes()
    if state is None:
        return None
    p = x.policy.partitions
    estimate = p.restart_seconds + state / p.repartition_bytes_per_second
    return max(estimate, s.last_restart_seconds or 0.0)


def can_restart(x: Inputs, model: CapacityModel, downtime: float | None) -> bool:
    """A restart is possible at all: stateful partitions known, repartition on, state measured."""
    return (
        model.current_partitions is not None
        and x.policy.partitions.repartition
        and downtime is not None
    )


def restart_within_budget(x: Inputs, possible: bool, downtime: float | None) -> bool:
    """A possible restart whose downtime fits the policy's ``maxDowntimeSeconds``."""
    return (
        possible and downtime is not None and downtime <= x.policy.partitions.max_downtime_seconds
    )


def smallest_restart(
    x: Inputs,
    model: CapacityModel,
    required: float,
    arrival: float,
    lo: int,
    hi: int,
    downtime: float,
) -> Layout | None:
    """The fewest executors (``lo..hi``) that, restarted with their partitions, carry
    ``required`` at the target utilization and catch up on what piled up while the job was down.

    The first batch after the restart holds the backlog plus the arrivals of the downtime; its
    oldest record, ``age + downtime`` old when the job is back, waits for that batch. So the
    layout's full capacity should process the pile within what the SLO leaves, ``SLO - age -
    downtime``; when no layout within bounds can (the SLO is lost whatever the size), the pile
    drains within ``lag.catchUpSeconds`` instead."""
    pol, s = x.policy, x.snapshot
    piled = (s.backlog_records or 0.0) + arrival * downtime
    left = pol.lag.slo_seconds - (s.backlog_age_seconds or 0.0) - downtime
    candidates = [Layout(n, partitions_for(x, model, n), True) for n in range(max(lo, 1), hi + 1)]
    layouts = sized_layouts(
        model, required, candidates, pol.utilization.target, pol.utilization.high
    )
    within_slo = (lay for lay in layouts if left > 0 and model.capacity(lay) * left >= piled)
    catch_up = (
        lay
        for lay in layouts
        if (model.capacity(lay) - arrival) * pol.lag.catch_up_seconds >= piled
    )
    return next(within_slo, None) or next(catch_up, None)


def restart_pays(x: Inputs, saved_executors: int, downtime: float) -> bool:
    """A repartition that saves executors pays if the saving over the stabilization window
    exceeds the executor time lost while the job is down."""
    horizon = max(x.policy.timing.scale_down_stabilization_seconds, downtime)
    return saved_executors * horizon > downtime * x.policy.executors.max


def why_no_restart(x: Inputs, downtime: float | None) -> str:
    """Why a stateful stage cannot be repartitioned (for a PartitionBound hold)."""
    return (
        "repartition is disabled"
        if not x.policy.partitions.repartition
        else "state size is unknown"
        if downtime is None
        else f"its downtime ({downtime:.0f} s) exceeds maxDowntimeSeconds"
    )
