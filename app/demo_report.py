"""The demo's outputs: timeline.csv, timeline.png, summary.json and report.html (docs/simulator.md
has the summary's fields)."""

from __future__ import annotations

import base64
import csv
import html
import itertools
import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from controller.simulator.report import direction_changes


@dataclass
class Row:
    """One second of the demo, as the timeline records it."""

    t: float
    input_rate: float | None
    processed_rate: float | None
    backlog_records: float | None
    lag_seconds: float | None
    executors: int
    executors_target: int | None
    partitions: int | None
    phase: str
    action: str = ""
    reason: str = ""


def write_timeline(path: Path, rows: list[Row]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow([fl.name for fl in fields(Row)])
        for r in rows:
            w.writerow(["" if v is None else v for v in asdict(r).values()])


def summarize(rows: list[Row], slo: float, actions: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's figures from its timeline (1 s rows) and the actions carried out."""
    dt = [b.t - a.t for a, b in itertools.pairwise(rows)] + [1.0]
    lags = [r.lag_seconds for r in rows]
    targets = [rows[0].executors] if rows else []
    targets += [a["executors"] for a in actions if a.get("executors") is not None]
    return {
        "duration_seconds": round(rows[-1].t - rows[0].t, 1) if rows else 0.0,
        "slo_seconds": slo,
        "slo_violation_seconds": round(
            sum(d for r, d in zip(rows, dt, strict=True) if (r.lag_seconds or 0) > slo), 1
        ),
        "max_lag_seconds": round(max((x for x in lags if x is not None), default=0.0), 2),
        "executor_seconds": round(sum(r.executors * d for r, d in zip(rows, dt, strict=True)), 1),
        "scaling_actions": len(actions),
        "repartitions": sum(1 for a in actions if a.get("partitions") is not None),
        "direction_changes": direction_changes(targets),
    }


def plot(path: Path, rows: list[Row], slo: float, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [r.t for r in rows]

    def series(name: str) -> list[float]:
        return [math.nan if getattr(r, name) is None else float(getattr(r, name)) for r in rows]

    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    ax1.plot(t, series("input_rate"), label="input rate", color="tab:blue")
    ax1.plot(t, series("processed_rate"), label="processed rate (last batch)", color="tab:green")
    ax1.set_ylabel("records/s")
    ax1.legend(loc="upper right")
    ax1.set_title(title)
    ax2.plot(t, series("lag_seconds"), label="lag (backlog age)", color="tab:red")
    ax2.axhline(slo, linestyle="--", color="gray", label=f"SLO {slo:g} s")
    ax2.set_ylabel("s")
    ax2.legend(loc="upper right")
    ax3.step(t, series("executors"), where="post", label="executors", color="tab:purple")
    ax3.step(t, series("partitions"), where="post", label="state partitions", color="tab:orange")
    ax3.set_ylabel("count")
    ax3.set_xlabel("t (s)")
    for r in rows:
        if r.action:
            for ax in (ax1, ax2, ax3):
                ax.axvline(r.t, color="black", alpha=0.25, linewidth=1)
            ax3.annotate(r.reason, (r.t, 0.2), rotation=90, fontsize=7, va="bottom")
    ax3.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_html(
    path: Path, summary: dict[str, Any], png: Path, decisions: list[dict[str, Any]]
) -> None:
    img = base64.b64encode(png.read_bytes()).decode() if png.exists() else ""
    rows = "".join(
        f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(json.dumps(v))}</td></tr>"
        for k, v in summary.items()
    )
    acts = "".join(
        f"<tr><td>{d['t']:.0f}</td><td>{html.escape(d['reason'])}</td>"
        f"<td>{html.escape(d['message'])}</td></tr>"
        for d in decisions
    )
    path.write_text(
        "<!doctype html><meta charset=utf-8><title>stream-autoscaler demo</title>"
        "<style>body{font-family:sans-serif;max-width:1000px;margin:auto}"
        "td{border-bottom:1px solid #ddd;padding:2px 8px;vertical-align:top}</style>"
        "<h1>stream-autoscaler demo</h1>"
        f"<img alt=timeline src='data:image/png;base64,{img}' style='width:100%'>"
        f"<h2>Summary</h2><table>{rows}</table>"
        f"<h2>Decisions that changed something</h2><table>{acts}</table>",
        encoding="utf-8",
    )
