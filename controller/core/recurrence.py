"""Memory of recurrence: a scale-in is worth it only if the next burst is far enough away.

A scale-in waits a stabilization window after the load falls, so on bursts that recur every
few minutes it lands just before the next burst: it saves a few executor-seconds and buys a
scale-out (often a restart that spreads state again) with its downtime and lag. The job's own
history tells how bursts come back: the spacing of its past scale-outs, when regular, is a
period (:func:`recurrence`), and the next burst is due one period after the last. A scale-in
now saves ``(executors now - target) x seconds until then`` executor-seconds; the scale-out it
buys costs the executors held while they start (``timing.executorStartupSeconds``) and, when
the past scale-outs restarted the query, while it is down (the restart's downtime):
``executors now x (startup + downtime)`` (:func:`weigh_scale_in`). A scale-in that pays is taken
as soon as the load allows, without waiting out the stabilization window (the history, not a
minute of low load, says the burst is over for a while); one that does not is deferred. Either
way the reason gives both figures (``test_recurrence.py``). The period is read only from the
scale-outs still in the history (``maxAgeSeconds``, an hour by default): bursts that stop
coming age out of it, and the stabilization window rules again. Scale-outs made ahead of a
forecast burst (:mod:`~controller.core.anticipation`) are not read as bursts: they come a lead
before the period's grid, and a forecast must not feed itself.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

from contracts.history import HistoryEntry, ScalingHistory
from controller.core.inputs import Inputs
from controller.core.reasons import RESTARTING_ACTIONS, Reason
from controller.core.repartition import repartition_downtime

RECURRENCE_MIN_BURSTS = 3
"""Scale-outs on record before their spacing is read as a period: two gaps between three bursts
(one gap is a coincidence)."""

RECURRENCE_TOLERANCE = 0.25
"""The gaps between scale-outs are a period only when each is within this share of a period
of a whole number of periods: bursts that come back irregularly are not predicted."""


class Recurrence(NamedTuple):
    """When the next burst is expected, from the spacing of the past ones."""

    bursts: int
    """Bursts the period was read from (:func:`burst_spans`)."""
    period: float
    """The shortest gap between them (s); every other gap is a whole number of periods."""
    next_in: float
    """Seconds from now to the next burst the period predicts."""
    restarts: bool
    """The latest scale-out restarted the query (a repartition or a recovery)."""
    jitter: float
    """How far the gaps strayed from whole periods (s): the forecast's past accuracy."""
    last: HistoryEntry
    """The latest burst's last scale-out: the layout that burst needed."""


RECURRENCE_MAX_PERIODS = 2
"""A gap between bursts may span at most this many periods (a burst carried without a
scale-out leaves two): with more, any spacing fits some multiple of a short period within the
tolerance, and a period read so is a coincidence."""


def _grows(e: HistoryEntry) -> bool:
    before = e.executors_before
    return e.executors is not None and before is not None and e.executors > before


def _shrinks(e: HistoryEntry) -> bool:
    before = e.executors_before
    return e.executors is not None and before is not None and e.executors < before


def burst_spans(history: ScalingHistory) -> list[tuple[HistoryEntry, HistoryEntry]]:
    """Each burst on record as (its first scale-out, its last): scale-outs with no scale-in
    between them are one burst (a second step of the same load, a restart sized again on the
    pile its own downtime left), so their spacing is not a period (a noisy plateau's two
    restarts 20 s apart made every later gap "a whole number of 20 s periods":
    ``test_recurrence.py``, "scale-outs with no scale-in between are one burst")."""
    out: list[tuple[HistoryEntry, HistoryEntry]] = []
    open_ = False
    for e in history.entries:
        if e.kind != "action":
            continue
        if _grows(e) and e.reason != Reason.ANTICIPATED_BURST:
            if open_:
                out[-1] = (out[-1][0], e)
            else:
                out.append((e, e))
            open_ = True
        elif _shrinks(e):
            open_ = False
    return out


def recurrence(history: ScalingHistory, now: float) -> Recurrence | None:
    """The period of the job's bursts and when the next is due, or None when the history holds
    fewer than :data:`RECURRENCE_MIN_BURSTS` bursts (:func:`burst_spans`) or their gaps are
    irregular (:data:`RECURRENCE_TOLERANCE`, :data:`RECURRENCE_MAX_PERIODS`)."""
    seen = burst_spans(history)
    if len(seen) < RECURRENCE_MIN_BURSTS:
        return None
    starts = [first for first, _ in seen]
    gaps = [b.time - a.time for a, b in itertools.pairwise(starts)]
    period = min(gaps)
    if period <= 0 or max(gaps) > (RECURRENCE_MAX_PERIODS + RECURRENCE_TOLERANCE) * period:
        return None
    # a burst carried without a scale-out leaves a gap of two periods, not an irregular one
    jitter = max(abs(g - period * round(g / period)) for g in gaps)
    if jitter > RECURRENCE_TOLERANCE * period:
        return None
    since = now - starts[-1].time
    next_in = period - since % period if since >= 0 else period
    last = seen[-1][1]
    return Recurrence(len(seen), period, next_in, last.action in RESTARTING_ACTIONS, jitter, last)


def burst_downtime(x: Inputs, rec: Recurrence) -> float:
    """Seconds the job is down for the scale-out a burst needs: the restart's when the past
    scale-outs restarted the query, else none."""
    return (repartition_downtime(x) or 0.0) if rec.restarts else 0.0


def weigh_scale_in(x: Inputs, n_cur: int, target: int) -> tuple[bool, str] | None:
    """Whether a scale-in ``n_cur -> target`` pays before the next burst the history predicts
    (see the module), and why; None without a period (then the stabilization window rules)."""
    rec = recurrence(x.history, x.now)
    if rec is None or target >= n_cur:
        return None
    saves = (n_cur - target) * rec.next_in
    startup = x.policy.timing.executor_startup_seconds
    down = burst_downtime(x, rec)
    costs = n_cur * (startup + down)
    how = f"{startup:g} s executor start" + (f", ~{down:.0f} s down" if down else "")
    said = (
        f"{rec.bursts} bursts came every ~{rec.period:.0f} s, the next due in ~{rec.next_in:.0f}"
        f" s: scaling in {n_cur} -> {target} saves ~{saves:,.0f} executor-s and the scale-out "
        f"it needs costs ~{costs:,.0f} ({how} at {n_cur} executors)"
    )
    return saves >= costs, said
