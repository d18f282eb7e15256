"""oracle-plus: a clairvoyant schedule that pays overhead, waves and start delay, replayed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from contracts.policy import ScalingPolicySpec
from contracts.trace import load_trace, parse_trace
from controller.simulator.cli import load_policy
from controller.simulator.compare import ALL, compare
from controller.simulator.model import JobModel
from controller.simulator.oracle import solve
from controller.simulator.oracle_plus import (
    NAME,
    ScheduleAutoscaler,
    batch_service,
    cheapest_clean_static,
    delay_steps,
    plan_and_replay,
    plan_partitions,
    solve_plus,
)

ROOT = Path(__file__).resolve().parents[3]
TRACES = sorted((ROOT / "traces").glob("*.csv"))
FLUID_RATIO = 1.45
"""oracle-plus's executor-seconds at most this many times the fluid oracle's on every bundled
trace at the default 30 s SLO: what the start delay, the per-batch overhead and the work of a
batch given up by a restart cost a clairvoyant (the most: ``absorbable``, three 10 s bursts,
1.40x; a plan with one batch per trigger cost 1.8-2.2x)."""


def policy(lo: int = 1, hi: int = 8, slo: float = 30.0) -> ScalingPolicySpec:
    return ScalingPolicySpec.model_validate(
        {"executors": {"min": lo, "max": hi}, "lag": {"sloSeconds": slo}}
    )


def test_steady_load_pays_the_overhead() -> None:
    # load 2 for 10 minutes: 2 executors do it fluidly, but every batch pays 0.3 s of overhead,
    # so 2 alone fall behind; batches that run long while behind pay it over more records, so
    # the plan holds 2 with a backlog inside the SLO and adds executors only to drain it
    trace = parse_trace("t,load\n0,2\n600,2\n")
    plan = solve_plus(trace, JobModel(), policy(), duration=600.0)
    fluid = solve(trace, JobModel(), policy(), duration=600.0).executor_seconds
    assert plan.slo_violation_seconds == 0
    assert max(plan.requested) > 2, "2 executors alone never catch up with the overhead"
    assert fluid < plan.executor_seconds < 600 * 3  # a batch per trigger would need 3 throughout


def test_a_backlog_is_served_in_longer_batches() -> None:
    """A step of the plan serves what the simulator's batches serve: everything while the job
    keeps up; behind, batches longer than a trigger that pay the overhead once, so more
    records per second than at the trigger rate, towards the fluid rate."""
    model = JobModel()
    serve = batch_service(model, [1, 2], 2, 1.0)
    light = serve(np.array([1_000.0]))
    assert light.tolist() == [[0.0], [0.0]]
    heavy = 10 * model.load_unit_rate  # ten seconds of one executor's work waiting
    left = serve(np.array([heavy]))[:, 0]
    served = heavy - left
    for k, e in enumerate((1, 2)):
        assert served[k] > model.sustainable_rate(e, 2), "a long batch amortizes the overhead"
        assert served[k] <= model.fluid_rate(e, 2) + 1e-6


def test_a_scale_out_delivers_only_after_the_start_delay() -> None:
    model = JobModel()
    trace = parse_trace("t,load\n0,1\n40,4\n120,4\n")
    plan = solve_plus(trace, model, policy(), duration=120.0)
    d = delay_steps(model, plan.dt)
    assert d * plan.dt >= model.executor_start_seconds
    assert plan.scale_outs, "a load of 4 needs more than the start's executors"
    for asked, delivers in plan.scale_outs:
        assert delivers - asked == d or delivers == len(plan.requested)
        assert plan.requested[asked] > plan.requested[asked - 1]
        # paid from the request, delivering nothing until the executors have started
        assert all(plan.delivering[i] == 0 for i in range(asked, delivers))
        assert all(plan.requested[i] == plan.requested[asked] for i in range(asked, delivers))
    # it must ask before the load arrives: the SLO leaves 30 s, the start takes 10 s
    assert plan.slo_violation_seconds == 0


def test_partitions_avoid_task_waves() -> None:
    # 48 state partitions split evenly over 1, 2, 3, 4, 6 and 8 executors
    assert plan_partitions(JobModel(), policy()) == 48


def _bench_setup(path: Path) -> tuple[JobModel, ScalingPolicySpec]:
    """The model and policy ``make bench`` runs a bundled trace with."""
    model, pol = JobModel(), load_policy(None)
    room = {"load15": 24, "step-10x-held": 20, "step-5x-held": 20, "burst-train": 20,
            "burst-train-long": 20, "periodic-tight": 12}.get(path.stem)  # fmt: skip
    if path.stem == "load15":
        model = JobModel(source_partitions=24)
    spec = pol.model_dump(by_alias=True)
    if room is not None:
        spec["executors"] = {"min": 1, "max": room}
    if path.stem == "periodic-tight":
        spec["lag"] = {**spec["lag"], "sloSeconds": 15}
    return model, ScalingPolicySpec.model_validate(spec)


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_replay_meets_the_slo_on_every_bundled_trace(path: Path) -> None:
    """The reported row is a replay that meets the SLO wherever the fluid oracle or a static
    size does, never costs more than the cheapest static size that meets it, and at most
    :data:`FLUID_RATIO` times the fluid oracle."""
    trace = load_trace(str(path))
    model, pol = _bench_setup(path)
    fluid = solve(trace, model, pol)
    got = plan_and_replay(trace, model, pol)
    res = got.run
    assert res.name == NAME
    assert res.conservation_error < 1e-3
    if got.static is None:  # the plan's own schedule: it pays what the fluid oracle does not
        assert got.plan.executor_seconds >= fluid.executor_seconds - 1e-6
        assert res.job.counters.executor_seconds >= fluid.executor_seconds - 1e-6
    static = cheapest_clean_static(trace, model, pol, trace.duration, 1.0)
    if fluid.slo_violation_seconds == 0 or static is not None:
        assert res.job.counters.slo_violation_seconds == 0
    else:  # above capacity no schedule is clean; the replay is no worse than the most executors
        assert got.plan.slo_violation_seconds > 0
    if static is not None:
        assert res.job.counters.executor_seconds <= static[1].job.counters.executor_seconds + 1e-6
    # an honest clairvoyant pays start delays and the batch overhead, and little else; under an
    # SLO not much longer than a restart it must also hold executors the fluid oracle never
    # needs (periodic-tight, 15 s: 3.2x), so the ratio is held at the default SLO
    if pol.lag.slo_seconds >= 30:
        assert res.job.counters.executor_seconds <= FLUID_RATIO * fluid.executor_seconds


def test_schedule_autoscaler_commands_restarts_out_and_scales_in() -> None:
    trace = parse_trace("t,load\n0,1\n40,4\n100,1\n160,1\n")
    plan = solve_plus(trace, JobModel(), policy(), duration=160.0)
    scaler = ScheduleAutoscaler(plan)
    got = plan_and_replay(trace, JobModel(), policy(), duration=160.0)
    kinds = {cmd.action for _, cmd in got.run.commands}
    assert kinds <= {"restart", "scale"}
    assert scaler.interval == plan.dt
    for when, cmd in got.run.commands:
        step = round(when / got.plan.dt)
        assert cmd.executors == got.plan.requested[step]
        if cmd.action == "restart":
            assert cmd.partitions == got.plan.partitions
    assert got.run.job.counters.repartitions == 0  # same partitions: restarts only


def test_comparison_has_oracle_plus() -> None:
    trace = parse_trace("t,load\n0,1\n30,3\n90,1\n120,1\n")
    cmp = compare(trace, JobModel(), policy(), list(ALL))
    assert list(cmp.summaries) == list(ALL)
    plus = cmp.summaries[NAME]
    assert plus["slo_violation_seconds"] == 0
    assert cmp.summaries["oracle"]["executor_seconds"] <= plus["executor_seconds"]
    assert plus["executor_seconds_vs_oracle_plus"] == 1.0
    assert all(
        s["oracle_plus_executor_seconds"] == plus["executor_seconds"]
        for s in cmp.summaries.values()
    )
    assert plus["planning_slo_seconds"] <= 30.0

