"""The benchmark suite: burst scenarios x (our engine + every baseline + the oracles) in the
simulator.

Run with ``make bench`` (``.venv/bin/python benchmarks/scenarios.py``). Prints a table per
scenario and the verdict on our engine's targets, and writes the same to
``docs/benchmark.md``. Options: ``--out FILE`` (markdown path), ``--no-write``, ``--policy F``,
``--model F``, ``--only NAME[,NAME]``. A scenario may override the policy and the model (shown
under its table).

Targets for our engine, per scenario (controller/simulator/targets.py):

- SLO-violation seconds at most 0.5x the ``flink`` baseline's (at most 5 s where flink has 0, i.e.
  under 0.5 s);
- executor-seconds at most 1.25x ``oracle-plus`` (a clairvoyant schedule that pays the per-batch
  overhead, the task waves and the executor start delay, replayed in the simulator with 0 s of
  SLO violation where any schedule can; see controller/simulator/oracle_plus.py). The fluid
  ``oracle`` (a lower bound no policy reaches) is shown for reference;
- at most 1 scaling action per load change, in the scenarios marked as single-bottleneck step
  changes (n/a elsewhere);
- no more scale direction flips than the load has;
- no lock-in: after each burst ends (a drop of the load by at least one executor's capacity), the
  lag is back under the SLO within the policy's ``lag.catchUpSeconds``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contracts.policy import ScalingPolicySpec  # noqa: E402
from contracts.trace import load_trace  # noqa: E402
from controller.simulator.cli import load_policy  # noqa: E402
from controller.simulator.compare import ALL, compare  # noqa: E402
from controller.simulator.model import JobModel, load_model  # noqa: E402
from controller.simulator.targets import reference_clause, verdict, why_missed  # noqa: E402


@dataclass(frozen=True)
class Scenario:
    name: str
    trace: str
    what: str
    step_change: bool = False
    """A single-bottleneck step change: the actions-per-load-change target applies."""
    chaos: list[float] = field(default_factory=list)
    noise: float = 0.0
    policy: dict[str, Any] = field(default_factory=dict)
    """Policy overrides (camelCase, merged into the policy)."""
    model: dict[str, Any] = field(default_factory=dict)
    """Model overrides (camelCase)."""


SCENARIOS = [
    Scenario(
        "burst",
        "traces/burst.csv",
        "the demo burst: load 1 -> 4 -> 1 -> 2.5 -> 1",
        step_change=True,
    ),
    Scenario("step", "traces/step.csv", "step up 1 -> 3 at 60 s, down at 180 s", step_change=True),
    Scenario("spike", "traces/spike.csv", "short spike: load 5 for 20 s", step_change=True),
    Scenario("ramp", "traces/ramp.csv", "ramp 1 -> 4 over 180 s, then hold"),
    Scenario("diurnal", "traces/diurnal.csv", "sine 1 -> 4 -> 1 over 600 s"),
    Scenario(
        "flash-crowd",
        "traces/flash-crowd.csv",
        "jump to 5 at 60 s, decaying to 1.2; 8% load noise, 5% measurement noise",
        noise=0.05,
    ),
    Scenario(
        "driver-failure",
        "traces/burst.csv",
        "the demo burst, driver killed at 75 s (mid-burst)",
        chaos=[75.0],
    ),
    Scenario(
        "spikes",
        "traces/spikes.csv",
        "repeated short spikes: load 4 for 10 s every 60 s, five times",
        step_change=True,
    ),
    Scenario(
        "absorbable",
        "traces/absorbable.csv",
        "bursts the lag budget absorbs: load 2.5 for 10 s, three times (doing nothing meets the "
        "SLO)",
        step_change=True,
    ),
    Scenario(
        "oscillation",
        "traces/oscillation.csv",
        "square wave 1 <-> 3, period 60 s (the scale-down stabilization window)",
        step_change=True,
    ),
    Scenario("ramp-down", "traces/ramp-down.csv", "up to 4, then a slow ramp down to 1 over 300 s"),
    Scenario(
        "sawtooth",
        "traces/sawtooth.csv",
        "load 3 then 1 (a scale-in), then sawtooth bursts: 10 decaying to 1 over 10 s every 3 min",
    ),
    Scenario(
        "load-15",
        "traces/load15.csv",
        "steps 1 -> 5 -> 10 -> 15 -> 8 -> 1 (up to 15x one executor)",
        step_change=True,
        policy={"executors": {"max": 24}},
        model={"sourcePartitions": 24},
    ),
    Scenario(
        "step-10x-held",
        "traces/step-10x-held.csv",
        "a 10x step held 30 min (within what 16 executors process: no admission cap may hold "
        "the job below it)",
        step_change=True,
        policy={"executors": {"max": 20}},
    ),
    Scenario(
        "step-5x-held",
        "traces/step-5x-held.csv",
        "a 5x step held 20 min (the catch-up asks for more executors than the load: the surplus "
        "goes once the backlog is drained)",
        step_change=True,
        policy={"executors": {"max": 20}},
    ),
    Scenario(
        "burst-train",
        "traces/burst-train.csv",
        "10 bursts to 8x for 60 s, 90 s apart (shorter than stabilization plus cooldown: the "
        "history, not a minute of low load, decides each scale-in)",
        policy={"executors": {"max": 20}},
    ),
    Scenario(
        "burst-train-long",
        "traces/burst-train-long.csv",
        "6 bursts to 8x for 60 s, 240 s apart (longer than stabilization plus cooldown: each "
        "scale-in is due, the next burst comes back)",
        policy={"executors": {"max": 20}},
    ),
    Scenario(
        "periodic-tight",
        "traces/periodic-tight.csv",
        "8 bursts to 6x for 60 s every 210 s under a 15 s SLO (reacting is too slow for it; the "
        "history says when the next comes)",
        policy={"executors": {"max": 12}, "lag": {"sloSeconds": 15}},
    ),
    Scenario("slow-sine", "traces/slow-sine.csv", "sine 1 -> 5 -> 1 over 30 min, twice"),
    Scenario(
        "over-capacity",
        "traces/over-capacity.csv",
        "burst to 12 for 120 s, above what executors.max (8) can process: no schedule meets "
        "the SLO",
        step_change=True,
    ),
]


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def scenario_policy(policy: ScalingPolicySpec, sc: Scenario) -> ScalingPolicySpec:
    if not sc.policy:
        return policy
    return ScalingPolicySpec.model_validate(merged(policy.model_dump(by_alias=True), sc.policy))


def scenario_model(model: JobModel, sc: Scenario) -> JobModel:
    over = dict(sc.model)
    if sc.noise:
        over["noise"] = sc.noise
    if not over:
        return model
    return JobModel.model_validate(merged(model.model_dump(by_alias=True), over))


HEAD = [
    "autoscaler",
    "SLO viol s",
    "max lag s",
    "exec-s",
    "x oracle",
    "x oracle-plus",
    "actions",
    "act/change",
    "repart",
    "flips",
    "recovery s",
]


def row(name: str, s: dict[str, Any]) -> list[str]:
    def f(key: str, fmt: str) -> str:
        v = s.get(key)
        return "-" if v is None else fmt.format(v)

    return [
        name,
        f("slo_violation_seconds", "{:.0f}"),
        f("max_lag_seconds", "{:.1f}"),
        f("executor_seconds", "{:.0f}"),
        f("executor_seconds_vs_oracle", "{:.2f}"),
        f("executor_seconds_vs_oracle_plus", "{:.2f}"),
        f("scaling_actions", "{}"),
        f("actions_per_load_change", "{:.2f}"),
        f("repartitions", "{}"),
        f("direction_changes", "{}"),
        f("recovery_seconds", "{:.0f}"),
    ]


def markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "|".join("---" for _ in HEAD) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def plain(rows: list[list[str]]) -> str:
    widths = [max(len(x) for x in col) for col in zip(HEAD, *rows, strict=True)]
    def fmt(r: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))

    return "\n".join([fmt(HEAD), *(fmt(r) for r in rows)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmark.md"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--policy")
    ap.add_argument("--model")
    ap.add_argument("--only")
    args = ap.parse_args(argv)
    base_policy = load_policy(args.policy)
    base_model = load_model(args.model)
    chosen = [s for s in SCENARIOS if not args.only or s.name in args.only.split(",")]
    md = [
        "# Benchmark: our engine against the baselines in the simulator",
        "",
        "Generated by `make bench` (`.venv/bin/python benchmarks/scenarios.py`); the model, the "
        "baselines and the oracles are described in [simulator.md](simulator.md). Times in "
        "seconds; exec-s = executor-seconds; x oracle = exec-s over the fluid oracle's (a lower "
        "bound no policy reaches, for reference); x oracle-plus = exec-s over oracle-plus's (a "
        "clairvoyant schedule that pays the per-batch overhead, task waves and executor start "
        "delay, replayed in the simulator); flips = scale direction changes. The targets are "
        "listed in `benchmarks/scenarios.py`; n/a = the target does not apply to the scenario.",
        "",
    ]
    met_all: list[tuple[str, str, bool, bool]] = []
    started = time.perf_counter()
    for sc in chosen:
        trace = load_trace(str(ROOT / sc.trace))
        policy = scenario_policy(base_policy, sc)
        model = scenario_model(base_model, sc)
        t0 = time.perf_counter()
        cmp = compare(trace, model, policy, list(ALL), chaos=sc.chaos)
        took = time.perf_counter() - t0
        rows = [row(n, cmp.summaries[n]) for n in ALL]
        lags = [(x.t, x.lag_seconds) for x in cmp.runs["engine"].samples]
        checks = verdict(cmp.summaries, lags, trace, policy, model.load_unit_rate, sc.step_change)
        plus_lags = [(x.t, x.lag_seconds) for x in cmp.runs["oracle-plus"].samples]
        reference = verdict(cmp.summaries, plus_lags, trace, policy, model.load_unit_rate,
                            sc.step_change, row="oracle-plus")  # fmt: skip
        e = cmp.summaries["engine"]
        title = f"{sc.name}: {sc.what}"
        kind = "step change" if sc.step_change else "not a step change"
        plus = cmp.summaries["oracle-plus"]
        notes = [f"{e['load_changes']} load changes, {e['load_direction_changes']} load flips"]
        notes.append(kind)
        notes += [f"policy {sc.policy}"] if sc.policy else []
        notes += [f"model {sc.model}"] if sc.model else []
        notes.append(f"oracle-plus planned at SLO {plus['planning_slo_seconds']:g} s")
        print(f"\n== {title}  ({'; '.join(notes)}; {took:.2f} s)")
        print(plain(rows))
        md += [
            f"## {title}",
            "",
            f"`{sc.trace}`"
            + (f", `--chaos kill-driver@{sc.chaos[0]:g}`" if sc.chaos else "")
            + "; "
            + "; ".join(notes)
            + ".",
            "",
            markdown(rows),
            "",
        ]
        for target, (ok, figs) in checks.items():
            mark = "n/a" if ok is None else "met" if ok else "MISSED"
            print(f"  engine: {target}: {mark} ({figs})")
            md.append(f"- {target}: **{mark}** ({figs})")
            why = None if ok is not False else why_missed(
                target, cmp.runs["engine"].samples, cmp.runs["oracle-plus"].samples,
                policy.lag.slo_seconds,
            )  # fmt: skip
            if why:
                print(f"      why: {why}")
                md.append(f"  - why: {why}")
            ref = None if ok is not False else reference_clause(target, reference[target])
            if ref:
                print(f"      {ref}")
                md.append(f"  - {ref}")
            if ok is not None:
                met_all.append((sc.name, target, ok, ref is not None))
        md.append("")
    total = time.perf_counter() - started
    missed = [(s, t, unreachable) for s, t, ok, unreachable in met_all if not ok]
    summary = (
        f"{len(met_all) - len(missed)}/{len(met_all)} targets met over {len(chosen)} scenarios "
        f"({sum(u for *_, u in missed)} of the misses missed by oracle-plus too); suite ran in "
        f"{total:.1f} s"
    )
    print(f"\n{summary}")
    md += ["## Summary", "", summary + ".", ""]
    md += [f"- missed: {s}: {t}{' (oracle-plus too)' if u else ''}" for s, t, u in missed]
    if not args.no_write:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        kept = _hand_written(out)
        out.write_text("\n".join(md).rstrip() + "\n" + kept, encoding="utf-8")
        print(f"written {args.out}")
    return 0


HAND_WRITTEN = "<!-- hand-written below: make bench keeps it -->"
"""The line after which docs/benchmark.md holds measured figures this script does not make (the
test suite's time per tier, with their commands); a regeneration keeps them."""


def _hand_written(path: Path) -> str:
    if not path.exists():
        return ""
    text = path.read_text(encoding="utf-8")
    at = text.find(HAND_WRITTEN)
    return "" if at < 0 else "\n" + text[at:]


if __name__ == "__main__":
    sys.exit(main())
