"""Run our engine and baselines on one trace and summarize each (used by the CLI and bench)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.policy import ScalingPolicySpec
from contracts.trace import Trace
from controller.simulator import oracle as oracle_mod
from controller.simulator import oracle_plus as plus_mod
from controller.simulator.baselines import BASELINES, Autoscaler, make_baseline
from controller.simulator.loop import EngineAutoscaler, RunResult, run
from controller.simulator.model import JobModel
from controller.simulator.report import oracle_summary, summarize

ALL = ("engine", *BASELINES, "oracle", plus_mod.NAME)


@dataclass
class Comparison:
    """Summaries by autoscaler name, and the runs behind them (the fluid oracle has no run;
    ``oracle-plus`` is the replay of its schedule)."""

    summaries: dict[str, dict[str, Any]]
    runs: dict[str, RunResult]
    oracle: oracle_mod.OracleResult
    oracle_plus: plus_mod.PlusResult | None
    """None unless ``oracle-plus`` was among the names: planning and replaying it costs more
    than every other row together, so a comparison that does not show it does not pay for it."""


def expand(baseline: str | None) -> list[str]:
    """Autoscaler names to run for a --baseline value: always our engine first."""
    if baseline is None:
        return ["engine"]
    if baseline == "all":
        return list(ALL)
    names = [b.strip() for b in baseline.split(",") if b.strip()]
    for b in names:
        if b not in ALL or b == "engine":
            raise ValueError(
                f"--baseline {b!r}: choose static, static-mean, static-peak, hpa, dstream, flink, "
                "oracle, oracle-plus or all"
            )
    return ["engine", *[b for b in names if b != "engine"]]


def compare(
    trace: Trace,
    model: JobModel,
    policy: ScalingPolicySpec,
    names: list[str],
    *,
    duration: float | None = None,
    chaos: list[float] | None = None,
    engine: Autoscaler | None = None,
) -> Comparison:
    """Runs each named autoscaler on the same trace, model and policy.

    The oracles ignore ``chaos``: both are references for the load alone (a clairvoyant schedule
    that planned for the failure would be a different question)."""
    horizon = duration or trace.duration
    unit = model.load_unit_rate
    rates = trace.scaled(unit)
    best = oracle_mod.solve(trace, model, policy, horizon)
    plus = (
        plus_mod.plan_and_replay(trace, model, policy, horizon) if plus_mod.NAME in names else None
    )
    plus_seconds = plus.run.job.counters.executor_seconds if plus else None
    summaries: dict[str, dict[str, Any]] = {}
    runs: dict[str, RunResult] = {}
    for name in names:
        if name == "oracle":
            summaries[name] = oracle_summary(best, trace, policy, unit, horizon)
        elif name == plus_mod.NAME and plus is not None:
            runs[name] = plus.run
            summaries[name] = summarize(plus.run, trace, policy, best, unit)
            summaries[name]["planning_slo_seconds"] = plus.plan.slo_seconds
            summaries[name]["planned_executor_seconds"] = round(plus.plan.executor_seconds, 3)
        else:
            if name == "engine":
                scaler: Autoscaler = engine or EngineAutoscaler(policy)
                start = None
            else:
                scaler, n0, p0 = make_baseline(
                    name, model, policy, rates.mean(horizon), rates.peak(horizon)
                )
                start = (n0, p0)
            res = run(trace, model, policy, scaler, duration=horizon, chaos=chaos, start=start)
            runs[name] = res
            summaries[name] = summarize(res, trace, policy, best, unit)
        s = summaries[name]
        s["oracle_plus_executor_seconds"] = round(plus_seconds, 3) if plus_seconds else None
        s["executor_seconds_vs_oracle_plus"] = (
            round(s["executor_seconds"] / plus_seconds, 3) if plus_seconds else None
        )
    return Comparison(summaries, runs, best, plus)
