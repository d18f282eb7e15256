"""The demo's outputs: timeline.csv, timeline.png, summary.json, report.html and the live line
(docs/simulator.md has the summary's fields)."""

from __future__ import annotations

import base64
import csv
import html
import itertools
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contracts.trace import Trace
from controller.core.grading import SHORTFALL_SHARE
from controller.simulator.report import direction_changes

if TYPE_CHECKING:
    from controller.core import Decision, Evaluation
    from operators.sources.burst_clock import BurstBacklog, BurstClock


@dataclass
class Row:
    """One second of the demo, as the timeline records it.

    ``input_rate`` and ``processed_rate`` are Spark's, for the last batch (as the runner reports
    them): Spark's input rate drops to 0 while the query is stopped (a repartition); the
    processed rate is unknown (None) then, and both are None while the driver is down, although
    records keep arriving. What arrives is ``arrival_rate``: the trace's rate at that second.
    """

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
    arrival_rate: float | None = None
    """Records/s the burst source's trace delivers at this second (None: its run start is not
    known yet, see :func:`trace_lead`)."""


# --- what arrives: the trace on the burst source's clock ----------------------------------------


def trace_lead(checkpoint: str, t0: float) -> float | None:
    """How many seconds the burst source's trace clock is ahead of the demo's ``t``.

    The source counts trace time from its run start: the wall time at which the runner built
    the query (before it wrote its ready file, so before the demo's t=0 at ``t0``), checkpointed
    as ``runStartUs`` in every burst offset and kept across restarts (a recovery resumes the
    same clock: what arrived while the driver was down is backlog). So trace time is
    ``t + (t0 - run start)``. None until the first batch commits (the offset is on disk).
    """
    offset = _committed_offset(checkpoint)
    return None if offset is None else t0 - int(offset["runStartUs"]) / 1e6


def _committed_offset(checkpoint: str) -> dict[str, Any] | None:
    """The burst source's offset of the last committed batch (``{"offset": n, "runStartUs":
    ...}``), or None before the first commit."""
    from operators.errors import VerifierError
    from operators.state.committed import committed_progress

    try:
        offset: dict[str, Any] | None = committed_progress(checkpoint).offsets.get("main")
    except (OSError, ValueError, VerifierError):  # a commit being written: next second
        return None
    return offset


def source_trace(source: object) -> Trace | None:
    """The trace a burst source replays, in records/s (a load trace scaled by its
    ``loadUnitRate``, as the source scales it); None for another source."""
    from contracts.sources import BurstSource
    from contracts.trace import load_trace

    if not isinstance(source, BurstSource):
        return None
    trace = load_trace(source.trace)
    if trace.unit == "load":
        if source.load_unit_rate is None:
            return None
        trace = trace.scaled(source.load_unit_rate)
    return trace


def fill_arrivals(rows: Iterable[Row], trace: Trace, lead: float) -> None:
    """Sets ``arrival_rate`` of the rows that lack it: the trace's rate (records/s, a load
    trace already scaled) at trace time ``row.t + lead``. The run start is fixed, so rows
    recorded before it was known are filled exactly, not estimated."""
    for row in rows:
        if row.arrival_rate is None:
            row.arrival_rate = trace.rate_at(row.t + lead)


STOPPED_PHASES = frozenset({"Down", "Failed", "Starting", "Repartitioning"})
"""Phases in which no batch reports progress, so the runner's backlog and lag stay at its last
batch's while records keep arriving (``Down``: the demo's, the driver does not answer)."""


def backlog_while_stopped(
    phase: str, checkpoint: str, clock: BurstClock | None, now: float
) -> BurstBacklog | None:
    """What waits at wall time ``now`` (Unix s) behind the last committed batch, from the
    checkpoint and the trace, while the query is stopped (:data:`STOPPED_PHASES`); None while
    it runs, for a source without a trace clock, or before the first commit. The records of a
    batch a dead driver left in flight count as waiting: they are replayed. Without this the
    timeline froze the lag at its last batch's through a recovery or a repartition and the
    SLO-violation seconds missed the downtime."""
    if phase not in STOPPED_PHASES or clock is None:
        return None
    offset = _committed_offset(checkpoint)
    if offset is None:
        return None
    return clock.backlog(int(offset["offset"]), now, int(offset["runStartUs"]) / 1e6)


# --- when the query was not running: the runner's phases, sampled once a second ----------------

DOWNTIME_OF_PHASE = {
    "Repartitioning": "repartition",
    "Down": "recovery",  # the control endpoint did not answer: the driver is dead
    "Failed": "recovery",
    "Starting": "recovery",  # a new driver after a recovery, not yet running its query
    "Scaling": "scaling",  # a scale-in only (_downtime_kind): a scale-out runs beside the query
}
"""The runner's phases (contracts.runner_api.Phase, plus the demo's ``Down``) in which the
query is, or may be, stopped, by what caused it. ``Scaling`` only stops the query for a
scale-in (at a batch boundary); a scale-out runs beside it. Stopping/Stopped (the end of the
run) and an unknown phase are not shaded."""
DOWNTIME_LABEL = {
    "repartition": "repartition (phase Repartitioning)",
    "recovery": "recovery (driver down or Starting)",
    "scaling": "scale-in (the query stops at a batch boundary)",
}
DOWNTIME_COLOR = {"repartition": "tab:orange", "recovery": "tab:red", "scaling": "tab:gray"}


@dataclass(frozen=True)
class Downtime:
    """An interval ``[start, end)`` (demo seconds) the runner spent in a downtime phase."""

    start: float
    end: float
    kind: str
    """``repartition``, ``recovery`` or ``scaling`` (:data:`DOWNTIME_OF_PHASE`)."""


def _downtime_kind(row: Row) -> str | None:
    kind = DOWNTIME_OF_PHASE.get(row.phase)
    if kind == "scaling" and not (
        row.executors_target is not None and row.executors_target < row.executors
    ):
        return None  # a scale-out: new executors join a running query
    return kind


def downtime(rows: Sequence[Row]) -> list[Downtime]:
    """The intervals the timeline saw the runner in a downtime phase: from the first row in
    it to the first row in another phase (or the last row), so at the 1 s sampling's
    resolution. Consecutive phases of one kind (Down, then Starting) are one interval."""
    out: list[Downtime] = []
    i = 0
    while i < len(rows):
        kind = _downtime_kind(rows[i])
        j = i + 1
        while j < len(rows) and _downtime_kind(rows[j]) == kind:
            j += 1
        if kind is not None:
            out.append(Downtime(rows[i].t, rows[min(j, len(rows) - 1)].t, kind))
        i = j
    return out


# --- the live line -------------------------------------------------------------------------------


def decision_at(
    evaluations: Iterable[Evaluation], t: float, t0: float
) -> tuple[Evaluation, float] | None:
    """The latest evaluation made by demo second ``t`` (its own second included) and its age in
    seconds (0 within that second). An evaluation that acted is only reported once the action
    is over, under the time it started: its age then says how old what it saw is."""
    made = [ev for ev in evaluations if ev.time - t0 < math.floor(t) + 1]
    if not made:
        return None
    ev = max(made, key=lambda e: e.time)
    return ev, max(0.0, t - (ev.time - t0))


def live_line(
    row: Row,
    evaluations: Iterable[Evaluation],
    t0: float,
    acting: tuple[float, Decision] | None = None,
) -> str:
    """One line of the terminal's live view: what arrives, what Spark does, and the decision
    of this second, or the last one with its age (never an old decision as if current).
    ``acting`` is the decision being carried out now and since when (demo seconds): its
    evaluation is only reported once the action is over, so mid-action the line says that."""
    arrive = "-" if row.arrival_rate is None else f"{row.arrival_rate:,.0f}"
    done = "-" if row.processed_rate is None else f"{row.processed_rate:,.0f}"
    backlog = "-" if row.backlog_records is None else f"{row.backlog_records:,.0f}"
    lag = "-" if row.lag_seconds is None else f"{row.lag_seconds:.1f}s"
    line = (
        f"t={row.t:5.0f}s arrive {arrive:>9}/s done {done:>9}/s backlog {backlog:>10} "
        f"lag {lag:>6} exec {row.executors}/{row.executors_target} parts {row.partitions} "
        f"{row.phase}"
    )
    if acting is not None:
        since, d = acting
        return f"{line} | acting for {row.t - since:.0f} s: {d.reason.value}: {d.message[:90]}"
    found = decision_at(evaluations, row.t, t0)
    if found is None:
        return line + " | no decision yet"
    ev, age = found
    d = ev.decision
    when = "" if age < 1 else f"decision {age:.0f} s ago: "
    acted = " (acted)" if ev.acted else " (not carried out)" if ev.error else ""
    return f"{line} | {when}{d.reason.value}{acted}: {d.message[:90]}"


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


SCALE_OUT_REASONS = ("ScaleOut", "RepartitionStateBound", "RecoverFromFailure")
"""The actions whose capacity prediction the summary checks: those that added capacity."""

PREDICTION_SETTLE_SECONDS = 15.0
"""After an action's end, seconds before its executors are judged: new executors register,
the first batch of a restart clears its pile."""


def prediction_errors(
    rows: Sequence[Row],
    actions: Sequence[dict[str, Any]],
    utilization_target: float,
    saturated_lag: float,
) -> list[dict[str, Any]]:
    """Each scale-out's predicted capacity against what it delivered.

    The decision says "N sustain X records/s at the target utilization": the predicted full
    capacity is X / target. What N delivered is Spark's mean processed rate over the seconds
    from :data:`PREDICTION_SETTLE_SECONDS` after the action ended to the next action, counting
    only seconds when the job was saturated (lag over ``saturated_lag``: a backlog waited, so
    it processed as fast as it could). Never saturated: the capacity was not observed (None)."""
    out = []
    for i, a in enumerate(actions):
        if a.get("reason") not in SCALE_OUT_REASONS or not a.get("predicted_rate"):
            continue
        start = (a.get("t_end") or a["t"]) + PREDICTION_SETTLE_SECONDS
        end = actions[i + 1]["t"] if i + 1 < len(actions) else math.inf
        seen = [
            r.processed_rate
            for r in rows
            if start <= r.t < end
            and r.processed_rate is not None
            and r.executors == a.get("executors")
            and (r.lag_seconds or 0.0) > saturated_lag
        ]
        predicted = a["predicted_rate"] / utilization_target
        achieved = sum(seen) / len(seen) if seen else None
        out.append(
            {
                "t": a["t"],
                "reason": a["reason"],
                "executors": a.get("executors"),
                "predicted_rate": round(predicted),
                "achieved_rate": None if achieved is None else round(achieved),
                "saturated_seconds": len(seen),
                "error": None if achieved is None else round(achieved / predicted - 1.0, 3),
                # the engine's own rule for naming a shortfall (controller/core/grading.py)
                "shortfall": achieved is not None and achieved < SHORTFALL_SHARE * predicted,
            }
        )
    return out


def graded(p: dict[str, Any]) -> str:
    """One line for a prediction of :func:`prediction_errors`, naming a shortfall."""
    if p["achieved_rate"] is None:
        got = "never saturated after it: its capacity was not observed"
    else:
        got = (
            f"delivered {p['achieved_rate']:,} records/s ({p['error']:+.0%}) over "
            f"{p['saturated_seconds']} saturated s"
        )
        if p.get("shortfall"):
            got += (
                f" — a shortfall (under {SHORTFALL_SHARE:.0%} of the prediction): the executors "
                "delivered less than measured at calibration (noisy neighbours, a slower node, "
                "less CPU)"
            )
    return (
        f"t={p['t']:g} s {p['reason']} to {p['executors']} executor(s): predicted "
        f"{p['predicted_rate']:,} records/s at full use, {got}"
    )


ACTION_LABEL_LEVELS = 4
"""Rows of action labels above the plot; labels closer than their width go one row up."""


def stack_labels(spans: Sequence[tuple[float, float]], levels: int) -> list[int]:
    """A row for each label ``(x0, x1)`` (in x order) so that labels in one row do not overlap:
    the lowest free row, else (more labels crowd together than there are rows) the row that
    frees first."""
    ends = [-math.inf] * levels
    out = []
    for x0, x1 in spans:
        free = [lv for lv in range(levels) if ends[lv] <= x0]
        level = free[0] if free else min(range(levels), key=lambda lv: ends[lv])
        ends[level] = x1
        out.append(level)
    return out


def plot(
    path: Path, rows: list[Row], slo: float, title: str, actions: Sequence[dict[str, Any]] = ()
) -> None:
    """timeline.png: what arrives against what Spark processes, lag against the SLO, executors
    and partitions; the query's downtime shaded (from the runner's phases); each action a
    vertical line at its start, labelled with its reason code (and how long it took)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [r.t for r in rows]

    def series(name: str) -> list[float]:
        return [math.nan if getattr(r, name) is None else float(getattr(r, name)) for r in rows]

    fig, (top, ax1, ax2, ax3) = plt.subplots(
        4, 1, figsize=(12, 9), sharex=True, gridspec_kw={"height_ratios": [0.8, 3, 2.5, 2.5]}
    )
    ax1.plot(t, series("arrival_rate"), label="arriving (the trace)", color="tab:blue")
    ax1.plot(t, series("processed_rate"), label="processed (Spark, last batch)",
             color="tab:green")  # fmt: skip
    ax1.plot(t, series("input_rate"), label="Spark's input rate (last batch)", color="tab:cyan",
             linestyle=":", linewidth=1)  # fmt: skip
    ax1.set_ylabel("records/s")
    ax2.plot(t, series("lag_seconds"), label="lag (backlog age)", color="tab:red")
    ax2.axhline(slo, linestyle="--", color="gray", label=f"SLO {slo:g} s")
    ax2.set_ylabel("s")
    ax3.step(t, series("executors"), where="post", label="executors", color="tab:purple",
             linewidth=2.5, alpha=0.7)  # fmt: skip
    ax3.step(t, series("partitions"), where="post", label="state partitions", color="tab:orange",
             linestyle="--")  # fmt: skip
    ax3.set_ylabel("count")
    ax3.set_xlabel("t (s)")
    shown: set[str] = set()
    for d in downtime(rows):
        label = None if d.kind in shown else DOWNTIME_LABEL[d.kind]  # once in the legend
        shown.add(d.kind)
        for ax in (ax1, ax2, ax3):
            ax.axvspan(d.start, d.end, color=DOWNTIME_COLOR[d.kind], alpha=0.15, linewidth=0,
                       label=label if ax is ax1 else None)  # fmt: skip
    for ax in (ax1, ax2, ax3):  # beside the axes, not over the data
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, borderaxespad=0)
    top.set_title(title)
    top.set_ylim(-0.5, ACTION_LABEL_LEVELS - 0.5)
    top.set_yticks([])
    top.set_ylabel("actions", fontsize=8)
    marks = sorted(actions, key=lambda a: a["t"])
    for a in marks:
        for ax in (top, ax1, ax2, ax3):
            ax.axvline(a["t"], color="black", alpha=0.35, linewidth=1)
    if t:
        top.set_xlim(min(t), max(t))
    fig.tight_layout()
    _label_actions(fig, top, marks)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _label_actions(fig: Any, ax: Any, actions: Sequence[dict[str, Any]]) -> None:
    """Reason codes beside their lines, in rows measured so that no two overlap (after the
    layout, so the measured widths are the drawn ones)."""
    renderer = fig.canvas.get_renderer()
    edge = ax.get_window_extent(renderer).x1
    texts, spans = [], []
    for a in actions:
        took = a.get("t_end")
        label = a["reason"] + (f" ({took - a['t']:.0f} s)" if took is not None else "")
        txt = ax.text(a["t"], 0, f" {label}", fontsize=7, ha="left", va="center", clip_on=False)
        box = txt.get_window_extent(renderer)
        if box.x1 > edge:  # would run off the plot: it ends at its line instead
            txt.set_text(f"{label} ")
            txt.set_horizontalalignment("right")
            box = txt.get_window_extent(renderer)
        texts.append(txt)
        spans.append((box.x0, box.x1 + 4))
    order = sorted(range(len(texts)), key=lambda i: spans[i][0])
    levels = stack_labels([spans[i] for i in order], ACTION_LABEL_LEVELS)
    for i, level in zip(order, levels, strict=True):
        texts[i].set_y(level)


def write_html(
    path: Path,
    summary: dict[str, Any],
    png: Path,
    decisions: list[dict[str, Any]],
    actions: Sequence[dict[str, Any]] = (),
) -> None:
    """report.html: the plot (embedded), the summary, the actions carried out (start and end,
    the runner's steps: where the downtime went), each scale-out's predicted against achieved
    capacity (a shortfall named) and the decisions that changed something, with their
    messages."""
    img = base64.b64encode(png.read_bytes()).decode() if png.exists() else ""
    rows = "".join(
        f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(json.dumps(v))}</td></tr>"
        for k, v in summary.items()
    )
    done = "".join(
        f"<tr><td>{a['t']:.0f}</td><td>{_seconds(a.get('t_end'))}</td>"
        f"<td>{html.escape(str(a['action']))}</td><td>{html.escape(str(a['reason']))}</td>"
        f"<td>{_cell(a.get('executors'))}</td><td>{_cell(a.get('partitions'))}</td>"
        f"<td>{html.escape(step_line(a.get('steps') or {}))}</td></tr>"
        for a in actions
    )
    acts = "".join(
        f"<tr><td>{d['t']:.0f}</td><td>{html.escape(d['reason'])}</td>"
        f"<td>{html.escape(d['message'])}</td></tr>"
        for d in decisions
    )
    graded_items = "".join(
        f"<li>{html.escape(graded(p))}</li>" for p in summary.get("scale_out_predictions", [])
    ) or "<li>no action added capacity</li>"
    path.write_text(
        "<!doctype html><meta charset=utf-8><title>stream-autoscaler demo</title>"
        "<style>body{font-family:sans-serif;max-width:1000px;margin:auto}"
        "td,th{border-bottom:1px solid #ddd;padding:2px 8px;vertical-align:top;text-align:left}"
        "</style>"
        "<h1>stream-autoscaler demo</h1>"
        f"<img id=timeline alt=timeline src='data:image/png;base64,{img}' style='width:100%'>"
        f"<h2>Summary</h2><table>{rows}</table>"
        "<h2>Actions carried out</h2><table><tr><th>start (s)</th><th>end (s)</th>"
        "<th>action</th><th>reason</th><th>executors</th><th>partitions</th>"
        f"<th>runner steps (s)</th></tr>{done}</table>"
        f"<h2>Predicted against achieved capacity</h2><ul>{graded_items}</ul>"
        f"<h2>Decisions that changed something</h2><table>{acts}</table>",
        encoding="utf-8",
    )


def step_line(steps: dict[str, float]) -> str:
    """The runner's steps of one action, slowest first: where its downtime went."""
    ranked = sorted(steps.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {v:.1f}" for k, v in ranked)


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}"


def _cell(value: object) -> str:
    return "" if value is None else html.escape(str(value))
