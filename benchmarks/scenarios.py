"""The benchmark suite: burst scenarios x (our engine + every baseline) in the simulator.

Run with ``make bench`` (``.venv/bin/python benchmarks/scenarios.py``). Prints a table per
scenario and the verdict on our engine's targets (issue 2), and writes the same to
``docs/benchmark.md``. Options: ``--out FILE`` (markdown path), ``--no-write``, ``--policy F``,
``--model F``, ``--only NAME[,NAME]``.

Targets for our engine, per scenario:

- at most 1 scaling action per load change (one bottleneck at a time in these scenarios);
- SLO-violation seconds at most 0.5x the best autoscaling baseline (static, hpa, dstream, flink;
  the static-at-mean/at-peak rows are clairvoyant provisioning, shown for reference);
- executor-seconds at most 1.10x the oracle (a fluid lower bound, see controller/simulator/oracle);
- no more scale direction flips than the load has.
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

from contracts.trace import load_trace  # noqa: E402
from controller.simulator.cli import load_policy  # noqa: E402
from controller.simulator.compare import ALL, compare  # noqa: E402
from controller.simulator.model import load_model  # noqa: E402

AUTOSCALING_BASELINES = ("static", "hpa", "dstream", "flink")


@dataclass(frozen=True)
class Scenario:
    name: str
    trace: str
    what: str
    chaos: list[float] = field(default_factory=list)
    noise: float = 0.0


SCENARIOS = [
    Scenario("burst", "traces/burst.csv", "the demo burst: load 1 -> 4 -> 1 -> 2.5 -> 1"),
    Scenario("step", "traces/step.csv", "step up 1 -> 3 at 60 s, down at 180 s"),
    Scenario("spike", "traces/spike.csv", "short spike: load 5 for 20 s"),
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
]


def verdict(rows: dict[str, dict[str, Any]]) -> dict[str, tuple[bool, str]]:
    """Each target: (met, the figures behind it)."""
    e = rows["engine"]
    out: dict[str, tuple[bool, str]] = {}
    changes = e["load_changes"] or 0
    per = e["scaling_actions"] / changes if changes else float(e["scaling_actions"])
    out["actions/change <= 1"] = (per <= 1.0 + 1e-9, f"{e['scaling_actions']} / {changes}")
    base = {n: rows[n]["slo_violation_seconds"] for n in AUTOSCALING_BASELINES if n in rows}
    best_name = min(base, key=lambda n: base[n])
    best = base[best_name]
    ok = e["slo_violation_seconds"] <= 0.5 * best + 1e-9
    out["SLO viol <= 0.5x best baseline"] = (
        ok,
        f"{e['slo_violation_seconds']:.0f} s vs {best:.0f} s ({best_name})",
    )
    ratio = e["executor_seconds_vs_oracle"]
    out["exec-s <= 1.10x oracle"] = (ratio is not None and ratio <= 1.10, f"{ratio:.2f}x")
    out["flips <= load flips"] = (
        e["direction_changes"] <= e["load_direction_changes"],
        f"{e['direction_changes']} vs {e['load_direction_changes']}",
    )
    return out


HEAD = [
    "autoscaler",
    "SLO viol s",
    "max lag s",
    "exec-s",
    "x oracle",
    "x trig-oracle",
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
        "{:.2f}".format(s["executor_seconds"] / s["oracle_at_trigger_executor_seconds"]),
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
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))  # noqa: E731
    return "\n".join([fmt(HEAD), *(fmt(r) for r in rows)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmark.md"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--policy")
    ap.add_argument("--model")
    ap.add_argument("--only")
    args = ap.parse_args(argv)
    policy = load_policy(args.policy)
    base_model = load_model(args.model)
    chosen = [s for s in SCENARIOS if not args.only or s.name in args.only.split(",")]
    md = [
        "# Benchmark: our engine against the baselines in the simulator",
        "",
        "Generated by `make bench` (`.venv/bin/python benchmarks/scenarios.py`); the model and "
        "the baselines are described in [simulator.md](simulator.md). Times in seconds; "
        "exec-s = executor-seconds; x oracle = exec-s over the oracle's (a fluid lower bound); "
        "flips = scale direction changes.",
        "",
    ]
    met_all: list[tuple[str, str, bool]] = []
    started = time.perf_counter()
    for sc in chosen:
        trace = load_trace(str(ROOT / sc.trace))
        model = base_model.model_copy(update={"noise": sc.noise}) if sc.noise else base_model
        t0 = time.perf_counter()
        cmp = compare(trace, model, policy, list(ALL), chaos=sc.chaos)
        took = time.perf_counter() - t0
        rows = [row(n, cmp.summaries[n]) for n in ALL]
        checks = verdict(cmp.summaries)
        e = cmp.summaries["engine"]
        title = f"{sc.name}: {sc.what}"
        print(
            f"\n== {title}  ({e['load_changes']} load changes, "
            f"{e['load_direction_changes']} load flips; {took:.2f} s)"
        )
        print(plain(rows))
        md += [
            f"## {title}",
            "",
            f"`{sc.trace}`"
            + (f", `--chaos kill-driver@{sc.chaos[0]:g}`" if sc.chaos else "")
            + f"; {e['load_changes']} load changes, {e['load_direction_changes']} "
            "direction flips in the load.",
            "",
            markdown(rows),
            "",
        ]
        for target, (ok, figs) in checks.items():
            mark = "met" if ok else "MISSED"
            print(f"  engine: {target}: {mark} ({figs})")
            md.append(f"- {target}: **{mark}** ({figs})")
            met_all.append((sc.name, target, ok))
        md.append("")
    total = time.perf_counter() - started
    missed = [(s, t) for s, t, ok in met_all if not ok]
    summary = f"{len(met_all) - len(missed)}/{len(met_all)} targets met; suite ran in {total:.1f} s"
    print(f"\n{summary}")
    md += ["## Summary", "", summary + ".", ""]
    md += [f"- missed: {s}: {t}" for s, t in missed]
    if not args.no_write:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("\n".join(md).rstrip() + "\n", encoding="utf-8")
        print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
