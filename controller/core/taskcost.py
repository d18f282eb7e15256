"""The fixed cost of a task, per stage, fitted from windows at different loads.

A task's time is a part per record plus a part every task pays whatever it reads: launch and
deserialization, a shuffle fetch, opening and committing its state store (RocksDB syncs its
files to the checkpoint on every commit), opening and committing its output file. Busy time
per record taken at one load folds the fixed part into the per-record cost, so a light load
looks busy and a long batch looks as dear per record as a short one. Measured on this machine
(docs/spark-facts.md): the demo's stateful task at a quarter core took ~1 s for 50,000 records,
of which Spark's own "time to commit changes" was 0.4-0.6 s; four such executors at 20,770
records/s were read as 178% busy and scaled out to six.

Each evaluation keeps one :class:`~contracts.history.CostSample` per stage (busy time, tasks,
records of its window) in the history, one per band of records per task, and one for the whole
batch at its layout (:func:`~controller.core.capacity.batch_key`: wall time, batches, records),
whose fixed part also holds what no task's busy time shows — the gaps between waves and stages
at a small CPU quota. Over the samples of a stage, a least-squares line of task seconds against
records per task separates the two parts: its intercept is the fixed cost
(:func:`fixed_task_seconds`). The capacity model then counts it once per task wave of a batch,
with the driver's overhead (:meth:`~controller.core.capacity.CapacityModel.fixed_seconds`), so
longer batches amortize it; the batches' fixed wall time keeps the wall-time fit
(:func:`~controller.core.capacity.wall_fit`) from reading it as a cost per record.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from contracts.history import CostSample
from controller.core.capacity import MAX_FIXED_SHARE, batch_key, records_in_window
from controller.core.reasons import Reason
from controller.core.snapshot import MetricsSnapshot

MIN_SAMPLES = 3
"""Windows of a stage needed before a fixed cost is fitted: a line through two points fits any
noise exactly."""

MIN_SPREAD = 2.0
"""The most records per task over the fewest among the samples: loads closer than this cannot
tell a fixed cost from a per-record one."""

MIN_FIXED_SHARE = 0.1
"""A fitted fixed cost below this share of the mean task time is noise, not a fixed cost: 5%
noise on busy time over windows at different loads fits intercepts of a few percent."""


UNLEARNED = frozenset({
    Reason.NO_METRICS, Reason.STALE_METRICS, Reason.INSUFFICIENT_DATA,
    Reason.ACTION_IN_PROGRESS, Reason.RECOVER_FAILURE, Reason.COOLDOWN,
})  # fmt: skip
"""Decisions whose window does not describe the job at one layout (no or old data, a restart
still settling, a failure, the cooldown right after an action): no cost sample is kept from
them (:func:`controller.core.evaluate.evaluate`)."""


def samples(s: MetricsSnapshot, now: float) -> tuple[CostSample, ...]:
    """One cost sample per stage whose busy time and tasks per batch the window knows, and one
    of the batches' wall time at the current layout
    (:func:`~controller.core.capacity.batch_key`)."""
    records = records_in_window(s)
    if not records or records <= 0 or not s.batches:
        return ()
    out = []
    if s.executors and s.batch_duration_seconds:
        stateful = s.stateful_stage()
        key = batch_key(s.executors, stateful.partitions if stateful else None)
        out.append(CostSample(time=now, stage=key, tasks=float(s.batches), records=records,
                              busy_seconds=s.batch_duration_seconds * s.batches))  # fmt: skip
    for st in s.stages:
        if st.busy_seconds is None or st.partitions is None:
            continue
        out.append(CostSample(time=now, stage=st.name, tasks=float(st.partitions * s.batches),
                              records=records, busy_seconds=st.busy_seconds))  # fmt: skip
    return tuple(out)


def fixed_task_seconds(costs: Iterable[CostSample]) -> dict[str, float]:
    """Seconds each task of a stage pays whatever it reads, by stage name; a stage is absent
    until :data:`MIN_SAMPLES` windows spanning :data:`MIN_SPREAD` in records per task, or when
    the fit finds no fixed cost above :data:`MIN_FIXED_SHARE` of its mean task."""
    points: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for c in costs:
        points[c.stage].append((c.records / c.tasks, c.busy_seconds / c.tasks))
    out: dict[str, float] = {}
    for stage, pts in points.items():
        xs = [x for x, _ in pts]
        if len(pts) < MIN_SAMPLES or min(xs) <= 0 or max(xs) / min(xs) < MIN_SPREAD:
            continue
        mx = sum(xs) / len(pts)
        my = sum(y for _, y in pts) / len(pts)
        var = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in pts) / var
        # at most MAX_FIXED_SHARE of the shortest task: a flat or falling fit is noise around
        # a mostly fixed cost, and every stage keeps a cost per record
        fixed = min(my - slope * mx, MAX_FIXED_SHARE * min(y for _, y in pts))
        if fixed >= MIN_FIXED_SHARE * my:
            out[stage] = fixed
    return out
