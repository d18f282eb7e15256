"""Run summaries, timeline.csv, timeline.png, comparison.json and the table.

The summary's fields are a contract of ``demo`` and ``simulate`` (docs/simulator.md).
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from contracts.policy import ScalingPolicySpec
from contracts.trace import Trace
from controller.simulator.loop import RunResult, Sample
from controller.simulator.oracle import OracleResult


def load_events(trace: Trace, unit_rate: float, duration: float) -> list[tuple[float, int]]:
    """(time, +1 up / -1 down) of each load change: a move of at least one executor's capacity
    (``unit_rate``) away from the last level (hysteresis, so noise does not count)."""
    rates = trace if trace.unit == "input_rate" else trace.scaled(unit_rate)
    level: float | None = None
    events: list[tuple[float, int]] = []
    for t, v in zip(rates.times, rates.values, strict=True):
        if t >= duration:
            break
        if level is None:
            level = v
        elif abs(v - level) >= unit_rate - 1e-9:
            events.append((t, 1 if v > level else -1))
            level = v
    return events


def load_changes(trace: Trace, unit_rate: float, duration: float) -> tuple[int, int]:
    """(changes, direction flips) of the load (:func:`load_events`)."""
    events = load_events(trace, unit_rate, duration)
    flips = sum(1 for (_, a), (_, b) in itertools.pairwise(events) if a != b)
    return len(events), flips


def direction_changes(targets: list[int]) -> int:
    """Scale-up/scale-down flips in a sequence of executor targets."""
    flips, last = 0, 0
    for a, b in itertools.pairwise(targets):
        if a != b:
            d = 1 if b > a else -1
            flips += 1 if last and d != last else 0
            last = d
    return flips


def summarize(
    res: RunResult,
    trace: Trace,
    policy: ScalingPolicySpec,
    oracle: OracleResult | None,
    unit_rate: float,
) -> dict[str, Any]:
    """The run summary of one autoscaler run."""
    job, c = res.job, res.job.counters
    scaling = [cmd for _, cmd in res.commands if cmd.action in ("scale", "restart")]
    targets = [res.samples[0].executors_requested if res.samples else 0]
    targets += [cmd.executors for cmd in scaling]
    changes, load_flips = load_changes(trace, unit_rate, res.duration)
    arrived = job.arrived(res.duration)
    out: dict[str, Any] = {
        "name": res.name,
        "duration_seconds": res.duration,
        "slo_seconds": policy.lag.slo_seconds,
        "slo_violation_seconds": round(c.slo_violation_seconds, 3),
        "max_lag_seconds": round(c.max_lag_seconds, 3),
        "executor_seconds": round(c.executor_seconds, 3),
        "oracle_executor_seconds": round(oracle.executor_seconds, 3) if oracle else None,
        "executor_seconds_vs_oracle": (
            round(c.executor_seconds / oracle.executor_seconds, 3)
            if oracle and oracle.executor_seconds > 0
            else None
        ),
        "scaling_actions": len(scaling),
        "repartitions": c.repartitions,
        "restarts": c.restarts,
        "recoveries": sum(1 for _, cmd in res.commands if cmd.action == "recover"),
        "direction_changes": direction_changes(targets),
        "load_changes": changes,
        "load_direction_changes": load_flips,
        "actions_per_load_change": round(len(scaling) / changes, 3) if changes else None,
        "records_in": round(arrived, 1),
        "records_processed": round(job.processed, 1),
        "backlog_end": round(max(0.0, arrived - job.processed), 1),
        "conservation_error_records": res.conservation_error,
        "downtime_seconds": round(c.downtime_seconds, 3),
        "mean_executors": round(c.executor_seconds / res.duration, 3) if res.duration else None,
        "final_executors": job.requested,
        "final_partitions": job.partitions,
    }
    if c.failures:
        out["failures"] = c.failures
        out["recovery_seconds"] = _recovery_seconds(res, c.failures[0], policy)
    return out


def _recovery_seconds(res: RunResult, failed: float, policy: ScalingPolicySpec) -> float | None:
    """From the failure until the lag is back within the backlog tolerance (caught up)."""
    ok = max(policy.lag.backlog_tolerance_seconds, 2 * res.job.model.trigger_seconds)
    resumed = [t for t in res.job.counters.resumed if t > failed]
    if not resumed:
        return None
    for s in res.samples:
        if s.t >= resumed[0] and s.lag_seconds <= ok:
            return round(s.t - failed, 3)
    return None


def oracle_summary(
    oracle: OracleResult,
    trace: Trace,
    policy: ScalingPolicySpec,
    unit_rate: float,
    duration: float,
) -> dict[str, Any]:
    """The oracle as a row of the comparison (a fluid lower bound, see oracle.py)."""
    rates = trace if trace.unit == "input_rate" else trace.scaled(unit_rate)
    changes, flips = load_changes(trace, unit_rate, duration)
    arrived = rates.arrived(duration)
    backlog_end = oracle.backlog[-1] if oracle.backlog else 0.0
    return {
        "name": "oracle",
        "duration_seconds": duration,
        "slo_seconds": policy.lag.slo_seconds,
        "slo_violation_seconds": oracle.slo_violation_seconds,
        "max_lag_seconds": None,
        "executor_seconds": round(oracle.executor_seconds, 3),
        "oracle_executor_seconds": round(oracle.executor_seconds, 3),
        "executor_seconds_vs_oracle": 1.0,
        # the fluid optimum time-shares between neighbouring counts, so its action and flip
        # counts are artefacts of the 1 s grid, not a bar to meet
        "scaling_actions": None,
        "repartitions": None,
        "direction_changes": None,
        "load_changes": changes,
        "load_direction_changes": flips,
        "actions_per_load_change": None,
        "records_in": round(arrived, 1),
        "records_processed": round(arrived - backlog_end, 1),
        "backlog_end": round(backlog_end, 1),
        "lower_bound": True,
    }


# --- files ---------------------------------------------------------------------------------

TIMELINE_COLUMNS = [f.name for f in fields(Sample)]


def write_timeline(path: Path, res: RunResult) -> None:
    """timeline.csv: one row per sample; replayable as a trace (t,input_rate)."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=TIMELINE_COLUMNS)
        w.writeheader()
        for s in res.samples:
            row = asdict(s)
            for k, v in row.items():
                if isinstance(v, float):
                    row[k] = f"{v:.3f}".rstrip("0").rstrip(".") if math.isfinite(v) else ""
            w.writerow(row)


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")


MARKERS = {"scale": "tab:green", "restart": "tab:purple", "recover": "tab:red"}


def plot_timeline(path: Path, res: RunResult, slo: float, title: str) -> None:
    """timeline.png: rates, lag against the SLO, executors and partitions, action markers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = res.samples
    t = [x.t for x in s]
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    ax1.plot(t, [x.input_rate for x in s], label="input rate", color="tab:blue")
    # commits are lumpy (a catch-up batch lands in one second): plot a 5 s average, clipped
    done = [x.processed_rate for x in s]
    smooth = [
        sum(done[max(0, i - 4) : i + 1]) / len(done[max(0, i - 4) : i + 1])
        for i in range(len(done))
    ]
    ax1.plot(t, smooth, label="processed rate (5 s avg)", color="tab:orange", lw=0.8)
    peak = max([x.input_rate for x in s] or [1.0])
    ax1.set_ylim(0, 2.5 * peak if peak > 0 else None)
    ax1.set_ylabel("records/s")
    ax1.legend(loc="upper right")
    ax2.plot(t, [x.lag_seconds for x in s], label="lag (oldest unprocessed)", color="tab:red")
    ax2.axhline(slo, ls="--", color="gray", label=f"SLO {slo:g} s")
    ax2.set_ylabel("seconds")
    ax2.legend(loc="upper right")
    ax3.step(t, [x.executors for x in s], where="post", label="executors (live)")
    ax3.step(t, [x.executors_requested for x in s], where="post", ls=":", label="requested")
    ax3.step(t, [x.partitions for x in s], where="post", label="state partitions")
    ax3.set_ylabel("count")
    ax3.set_xlabel("t (s)")
    ax3.legend(loc="upper right")
    for when, cmd in res.commands:
        for ax in (ax1, ax2, ax3):
            ax.axvline(when, color=MARKERS.get(cmd.action, "black"), alpha=0.4, lw=1)
    for when in res.job.counters.failures:
        for ax in (ax1, ax2, ax3):
            ax.axvline(when, color="black", ls="-.", lw=1)
    ax1.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# --- table ---------------------------------------------------------------------------------

COLUMNS = [
    ("name", "autoscaler", "{}"),
    ("slo_violation_seconds", "SLO viol s", "{:.0f}"),
    ("max_lag_seconds", "max lag s", "{:.1f}"),
    ("executor_seconds", "exec-s", "{:.0f}"),
    ("executor_seconds_vs_oracle", "x oracle", "{:.2f}"),
    ("executor_seconds_vs_oracle_plus", "x oracle+", "{:.2f}"),
    ("scaling_actions", "actions", "{}"),
    ("actions_per_load_change", "act/change", "{:.2f}"),
    ("repartitions", "repart", "{}"),
    ("direction_changes", "flips", "{}"),
    ("backlog_end", "backlog end", "{:.0f}"),
]


def table(rows: list[dict[str, Any]], markdown: bool = False) -> str:
    """A comparison table, plain or markdown."""
    head = [h for _, h, _ in COLUMNS]
    body = [
        [fmt.format(r[k]) if r.get(k) is not None else "-" for k, _, fmt in COLUMNS] for r in rows
    ]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        lines += ["| " + " | ".join(b) + " |" for b in body]
        return "\n".join(lines)
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    out += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)) for b in body]
    return "\n".join(out)
