"""The engine on loads nobody tuned it on: random scenarios from a seed, against the Flink rule
and the static sizes, in the simulator.

``make bench`` holds the engine to its targets on a fixed suite, and a fixed suite is a suite
one tunes on. This draws fresh loads from families the suite has and has not (steps held,
burst trains at any gap, sines fast and slow, noisy plateaus, ramps, cliffs), each with random
sizes, timings and noise, and prints per scenario the engine's and the baselines' SLO-violation
seconds, executor-seconds and actions, then where the engine lost:

- more time over the SLO than the Flink rule (by over 5 s);
- more executor-seconds than the cheapest static size that met the SLO (a clairvoyant's
  choice, but one a user could have made by hand);
- more executor-seconds than 1.5x the Flink rule's while no better on the SLO.

Run with ``make bench-unseen`` (``.venv/bin/python benchmarks/unseen.py --seed N --count K``);
a different seed is a different set. The default policy with ``executors.max: 20`` and the
simulator's default job model, as the issue that asked for it measured.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contracts.policy import ScalingPolicySpec  # noqa: E402
from contracts.trace import parse_trace  # noqa: E402
from controller.simulator.cli import load_policy  # noqa: E402
from controller.simulator.compare import compare  # noqa: E402
from controller.simulator.model import JobModel  # noqa: E402

BASELINES = ["engine", "flink", "static-mean", "static-peak"]
SLO_SLACK_SECONDS = 5.0
"""Time over the SLO within which the engine is not said to lose to the Flink rule."""
COST_SLACK = 1.5
"""Executor-seconds over the Flink rule's beyond which the engine loses, when no better on the
SLO."""

Rows = list[tuple[float, float]]


def _steps(rng: random.Random) -> tuple[str, Rows]:
    lo, hi = rng.uniform(0.8, 2), rng.uniform(3, 12)
    at, held = rng.uniform(30, 200), rng.uniform(120, 1500)
    return f"step {lo:.1f}->{hi:.1f} held {held:.0f} s", [
        (0, lo), (at, hi), (at + held, lo), (at + held + 300, lo)]


def _train(rng: random.Random) -> tuple[str, Rows]:
    lo, hi = rng.uniform(0.8, 2), rng.uniform(3, 10)
    on, gap, n = rng.uniform(15, 120), rng.uniform(20, 400), rng.randint(4, 10)
    rows: Rows = [(0, lo)]
    t = rng.uniform(30, 120)
    for _ in range(n):
        rows += [(t, hi), (t + on, lo)]
        t += on + gap
    rows.append((t + 200, lo))
    return f"{n} bursts {lo:.1f}->{hi:.1f} for {on:.0f} s, {gap:.0f} s apart", rows


def _sine(rng: random.Random) -> tuple[str, Rows]:
    mid, amp = rng.uniform(2, 6), rng.uniform(0.5, 4)
    amp = min(amp, mid - 0.3)
    period = rng.choice([rng.uniform(60, 300), rng.uniform(600, 2400)])
    end = max(1200.0, 2 * period)
    rows = [(t, mid + amp * math.sin(2 * math.pi * t / period)) for t in _range(0, end, 10)]
    return f"sine {mid - amp:.1f}..{mid + amp:.1f}, period {period:.0f} s", rows


def _noisy(rng: random.Random) -> tuple[str, Rows]:
    level, noise = rng.uniform(1.5, 8), rng.uniform(0.05, 0.25)
    rows = [(t, max(0.2, level * (1 + rng.gauss(0, noise)))) for t in _range(0, 1800, 10)]
    return f"plateau {level:.1f} with {noise:.0%} noise", rows


def _ramp(rng: random.Random) -> tuple[str, Rows]:
    lo, hi, over = rng.uniform(0.8, 2), rng.uniform(4, 15), rng.uniform(120, 1800)
    rows = [(t, lo + (hi - lo) * t / over) for t in _range(0, over, 30)]
    end = rng.choice([hi, lo])  # held at the top, or a cliff
    rows += [(over + 1, end), (over + 600, end)]
    return f"ramp {lo:.1f}->{hi:.1f} over {over:.0f} s, then {end:.1f}", rows


FAMILIES = [_steps, _train, _sine, _noisy, _ramp]


def _range(start: float, stop: float, step: float) -> list[float]:
    return [start + i * step for i in range(int((stop - start) / step) + 1)]


def scenario(rng: random.Random) -> tuple[str, str]:
    """One random scenario: its description and its trace (``t,load`` CSV)."""
    what, rows = rng.choice(FAMILIES)(rng)
    text = "t,load\n" + "".join(f"{t:.0f},{max(0.1, v):.2f}\n" for t, v in _dedup(rows))
    return what, text


def _dedup(rows: Rows) -> Rows:
    """Rows with strictly increasing whole seconds (the trace format's rule)."""
    out: Rows = []
    for t, v in rows:
        if out and round(t) <= round(out[-1][0]):
            continue
        out.append((t, v))
    return out


def losses(s: dict[str, dict[str, Any]]) -> list[str]:
    """Where the engine lost on one scenario (see the module)."""
    e, f = s["engine"], s["flink"]
    out = []
    if e["slo_violation_seconds"] > f["slo_violation_seconds"] + SLO_SLACK_SECONDS:
        out.append(f"SLO {e['slo_violation_seconds']:.0f} s vs flink "
                   f"{f['slo_violation_seconds']:.0f} s")
    clean = [s[k]["executor_seconds"] for k in ("static-mean", "static-peak")
             if s[k]["slo_violation_seconds"] == 0]
    if clean and e["executor_seconds"] > min(clean):
        out.append(f"exec-s {e['executor_seconds']:.0f} vs the cheapest clean static "
                   f"{min(clean):.0f}")
    if (e["executor_seconds"] > COST_SLACK * f["executor_seconds"]
            and e["slo_violation_seconds"] >= f["slo_violation_seconds"]):
        out.append(f"exec-s {e['executor_seconds']:.0f} vs flink {f['executor_seconds']:.0f} "
                   "and no better on the SLO")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=12)
    ap.add_argument("--policy")
    args = ap.parse_args(argv)
    base = load_policy(args.policy)
    policy = ScalingPolicySpec.model_validate(
        {**base.model_dump(by_alias=True), "executors": {"min": 1, "max": 20}})
    model = JobModel()
    rng = random.Random(args.seed)
    print(f"{args.count} unseen scenarios, seed {args.seed} (cells: SLO-violation s / "
          "executor-s / actions)")
    print(f"{'#':>3}  {'engine':>20}  {'flink':>20}  {'static-mean':>16}  {'static-peak':>16}"
          "  scenario")
    lost: list[str] = []
    t0 = time.monotonic()
    for i in range(args.count):
        what, text = scenario(rng)
        s = compare(parse_trace(text, f"unseen-{args.seed}-{i}"), model, policy,
                    BASELINES).summaries

        def cell(name: str, width: int, s: dict[str, dict[str, Any]] = s) -> str:
            r = s[name]
            got = f"{r['slo_violation_seconds']:.0f} / {r['executor_seconds']:.0f}"
            if r.get("scaling_actions"):
                got += f" / {r['scaling_actions']}"
            return f"{got:>{width}}"

        print(f"{i:3}  {cell('engine', 20)}  {cell('flink', 20)}  {cell('static-mean', 16)}  "
              f"{cell('static-peak', 16)}  {what}")
        lost += [f"#{i} ({what}): {why}" for why in losses(s)]
    print(f"\nthe engine lost {len(lost)} time(s) over {args.count} scenarios "
          f"({time.monotonic() - t0:.0f} s):")
    for line in lost:
        print(f"- {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
