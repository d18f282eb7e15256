"""The benchmark's targets for our engine, as pure functions of the run summaries.

Each verdict is ``(met, figures)``; ``met`` is None where a target does not apply (the scenario
is not a step change, or no burst ends early enough to judge). ``benchmarks/scenarios.py``
prints them per scenario.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from contracts.policy import ScalingPolicySpec
from contracts.trace import Trace
from controller.simulator.loop import Sample
from controller.simulator.report import load_events

Verdict = tuple[bool | None, str]

SLO_FACTOR = 0.5
"""SLO-violation seconds at most this times the ``flink`` baseline's ..."""
SLO_FLOOR = 5.0
"""... or at most this many seconds where flink has none."""
COST_FACTOR = 1.25
"""Executor-seconds at most this times ``oracle-plus``'s."""


def slo_target(engine: float, flink: float) -> Verdict:
    """SLO-violation seconds <= 0.5x flink's (<= 5 s where flink has 0, i.e. under half a second:
    the table shows it as 0, and half of a fraction of a second is no bar to hold a policy to)."""
    if flink < 0.5:
        return (
            engine <= SLO_FLOOR + 1e-9,
            f"{engine:.1f} s vs flink {flink:.1f} s (floor {SLO_FLOOR:g} s)",
        )
    return (
        engine <= SLO_FACTOR * flink + 1e-9,
        f"{engine:.1f} s vs flink {flink:.1f} s (limit {SLO_FACTOR * flink:.1f} s)",
    )


def cost_target(engine: float, oracle_plus: float) -> Verdict:
    """Executor-seconds <= 1.25x oracle-plus."""
    if oracle_plus <= 0:
        return engine <= 1e-9, f"{engine:.0f} vs oracle-plus 0"
    ratio = engine / oracle_plus
    return ratio <= COST_FACTOR + 1e-9, f"{ratio:.2f}x ({engine:.0f} vs {oracle_plus:.0f})"


def actions_target(actions: int, load_changes: int, step_change: bool) -> Verdict:
    """<= 1 scaling action per load change, for single-bottleneck step changes only."""
    if not step_change:
        return None, f"{actions} / {load_changes} (not a step change)"
    if load_changes == 0:
        return actions == 0, f"{actions} / 0"
    return actions <= load_changes, f"{actions} / {load_changes}"


def flips_target(flips: int, load_flips: int) -> Verdict:
    """No more scale direction flips than the load has."""
    return flips <= load_flips, f"{flips} vs {load_flips}"


def burst_ends(trace: Trace, unit_rate: float, duration: float) -> list[float]:
    """When bursts end: every downward load change (:func:`load_events`: a drop of at least one
    executor's capacity from the last level)."""
    return [t for t, d in load_events(trace, unit_rate, duration) if d < 0]


def lock_in_target(
    lags: Iterable[tuple[float, float]],
    ends: list[float],
    slo: float,
    catch_up: float,
    duration: float,
) -> Verdict:
    """No lock-in: after each burst end, the lag (``(t, lag)`` samples) is back at or under the
    SLO within ``catch_up`` seconds. A burst whose deadline lies past the run is not judged."""
    samples = sorted(lags)
    judged, worst, worst_at, late = 0, 0.0, None, []
    for end in ends:
        deadline = end + catch_up
        back = next((t for t, lag in samples if t >= end - 1e-9 and lag <= slo + 1e-9), None)
        if back is None or back > deadline + 1e-9:
            if deadline > duration + 1e-9:
                continue  # the run ends before the deadline: cannot tell
            late.append(end)
            took = float("inf") if back is None else back - end
        else:
            took = back - end
        judged += 1
        if worst_at is None or took > worst:
            worst, worst_at = took, end
    if not judged:
        return None, "no burst end to judge"
    shown = "never" if worst == float("inf") else f"{worst:.0f} s"
    figs = f"worst {shown} after the drop at {worst_at:g} s (limit {catch_up:g} s), {judged} judged"
    return not late, figs


def verdict(
    summaries: dict[str, dict[str, Any]],
    lags: Iterable[tuple[float, float]],
    trace: Trace,
    policy: ScalingPolicySpec,
    unit_rate: float,
    step_change: bool,
    row: str = "engine",
) -> dict[str, Verdict]:
    """Every target of one row (the engine's by default; ``lags``: that row's ``(t, lag)``
    samples). Judged for ``oracle-plus`` too, it tells a target no schedule meets
    (:func:`reference_clause`)."""
    e = summaries[row]
    duration = e["duration_seconds"]
    return {
        "SLO viol <= 0.5x flink": slo_target(
            e["slo_violation_seconds"], summaries["flink"]["slo_violation_seconds"]
        ),
        "exec-s <= 1.25x oracle-plus": cost_target(
            e["executor_seconds"], summaries["oracle-plus"]["executor_seconds"]
        ),
        "actions/change <= 1": actions_target(
            e["scaling_actions"], e["load_changes"] or 0, step_change
        ),
        "flips <= load flips": flips_target(e["direction_changes"], e["load_direction_changes"]),
        "no lock-in": lock_in_target(
            lags,
            burst_ends(trace, unit_rate, duration),
            policy.lag.slo_seconds,
            policy.lag.catch_up_seconds,
            duration,
        ),
    }


def by_reason_in_force(
    samples: Sequence[Sample], weight: Callable[[Sample], float], top: int = 3
) -> str:
    """``weight`` summed over the run's samples by the engine's decision in force at each (the
    reason of the newest decision at or before it; "start" before the first), the largest
    ``top`` as shares: where a missed target's figure came from."""
    totals: dict[str, float] = {}
    reason, prev_t = "start", None
    for smp in samples:
        if smp.reason:
            reason = smp.reason
        dt = 1.0 if prev_t is None else smp.t - prev_t
        prev_t = smp.t
        w = weight(smp) * dt
        if w > 0:
            totals[reason] = totals.get(reason, 0.0) + w
    whole = sum(totals.values())
    if whole <= 0:
        return "nothing to attribute"
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{r} {v / whole:.0%}" for r, v in ranked)


def why_missed(
    target: str, engine: Sequence[Sample], plus: Sequence[Sample], slo: float
) -> str | None:
    """The 'why' printed under a missed target: the engine's decisions in force while it spent
    executor-seconds above oracle-plus, or while its lag was over the SLO (the SLO and lock-in
    targets); the actions it took, with when and why (the actions target)."""
    if target.startswith("exec-s"):
        want = {round(s.t): s.executors for s in plus}
        extra = by_reason_in_force(
            engine, lambda s: max(0.0, s.executors - want.get(round(s.t), s.executors))
        )
        return f"executor-seconds above oracle-plus's, by the engine's decision in force: {extra}"
    if target.startswith(("SLO", "no lock-in")):
        over = by_reason_in_force(engine, lambda s: 1.0 if s.lag_seconds > slo else 0.0)
        return f"seconds over the SLO, by the engine's decision in force: {over}"
    if target.startswith("actions"):
        acts = [
            f"{s.reason} at {s.t:g} s ({s.action} to {s.executors_requested} executors)"
            for s in engine
            if s.action in ("scale", "restart", "recover")
        ]
        return "the engine's actions: " + ("; ".join(acts) or "none")
    return None


def reference_clause(target: str, reference: Verdict) -> str | None:
    """What a missed target's line adds about ``oracle-plus`` (clairvoyant: it knows the whole
    trace and pays the same start delays, restarts and batch overhead), judged by the same
    target: when it misses too, no schedule we know meets the target on this trace. None for
    the executor-seconds target (oracle-plus is its yardstick) and when oracle-plus meets it."""
    ok, figs = reference
    if target.startswith("exec-s") or ok is not False:
        return None
    return f"oracle-plus (clairvoyant) misses it too ({figs}): no schedule we know meets it here"
