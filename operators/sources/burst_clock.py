"""The burst source's arithmetic: when each record arrives, and what waits at a wall time.

A burst trace gives an arrival rate over time; record ``i`` arrives when the trace has delivered
``i`` records. From that follow the latest offset at a time, the arrival time of an offset, the
backlog after a batch and its age, and how a batch's offsets split into read partitions. The
driver (latest offsets), the executors (event times), the runner (backlog) and the verifier all
use these, so they agree to the float.

Usage::

    clock = BurstClock.for_source(source)             # reads the trace file (cached by text)
    clock.latest_offset(now, run_start)               # records arrived at wall time ``now``
    clock.backlog(processed, now, run_start)          # BurstBacklog(arrived, records, age)
    partition_ranges(0, 10_000, 4)                    # [(0, 2500), (2500, 5000), ...]

No pyspark or pyarrow here: numpy and the trace contract only (tests/unit/operators/sources).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from contracts.trace import Trace, TraceError, parse_trace
from operators.errors import BurstSourceError

if TYPE_CHECKING:  # the manifest model (pydantic) only in annotations: the executors' Python
    # workers import this module and never build one (operators/sources/__init__.py)
    from contracts.sources import BurstSource


@dataclass(frozen=True)
class BurstBacklog:
    """The backlog of a burst source at one wall time."""

    arrived: int
    """Records arrived since the run start (the latest offset)."""
    records: int
    """Arrived but not yet processed (``arrived`` - processed end offset)."""
    age_seconds: float
    """Age of the oldest unprocessed record; 0 when nothing waits."""


class BurstClock:
    """Arrivals of one trace in records/s. All times are seconds since the run start.

    ``available(t)`` is how many records (offsets ``0..n-1``) have arrived by ``t``;
    ``arrival_times(n)`` inverts it, for arrays, with exactly the float arithmetic of
    :meth:`Trace.arrival_time` (so the driver, the executors and the verifier agree).
    """

    def __init__(self, trace: Trace, default_skew: float = 0.0) -> None:
        if trace.unit != "input_rate":
            raise BurstSourceError(f"{trace.source}: a t,load trace needs load_unit_rate")
        self.trace = trace
        starts, rates, begin, end, skews = [], [], [], [], []
        total = 0.0
        for i, start in enumerate(trace.times):
            stop = trace.times[i + 1] if i + 1 < len(trace.times) else math.inf
            rate = trace.values[i]
            seg = rate * (stop - start) if math.isfinite(stop) else math.inf
            if rate > 0:
                starts.append(start)
                rates.append(rate)
                begin.append(total)
                end.append(total + seg)
                skews.append(_skew_of(trace, i, default_skew))
            if math.isfinite(seg):
                total += seg
        self._starts = np.array(starts, dtype=np.float64)
        self._rates = np.array(rates, dtype=np.float64)
        self._begin = np.array(begin, dtype=np.float64)
        self._end = np.array(end, dtype=np.float64)
        self._skews = np.array(skews, dtype=np.float64)
        self.default_skew = default_skew

    @classmethod
    def for_source(cls, source: BurstSource, trace_text: str | None = None) -> BurstClock:
        """The clock of a manifest's burst source (reads its trace file unless given the text)."""
        return trace_clock(
            read_trace_text(source, trace_text), source.trace, source.load_unit_rate, source.skew
        )

    def available(self, elapsed: float) -> int:
        """Records arrived by ``elapsed`` seconds after the run start (the latest offset)."""
        return max(0, math.floor(self.trace.arrived(elapsed) + 1e-9))

    def latest_offset(self, now: float, run_start: float) -> int:
        """The latest offset at wall time ``now`` (Unix s) for a run started at ``run_start``."""
        return self.available(now - run_start)

    def arrival_time(self, offset: float) -> float:
        """When record ``offset`` arrived (s since the run start); inf if it never does."""
        return float(self.arrival_times(np.array([offset], dtype=np.float64))[0])

    def backlog_age(self, first_unprocessed: int, now: float, run_start: float) -> float:
        """Age (s) of the oldest record not yet processed; 0 when nothing is waiting."""
        if first_unprocessed >= self.latest_offset(now, run_start):
            return 0.0
        return max(0.0, now - run_start - self.arrival_time(first_unprocessed))

    def backlog(self, processed: int, now: float, run_start: float) -> BurstBacklog:
        """The backlog at wall time ``now`` (Unix s) once offsets ``0..processed-1`` are read."""
        arrived = self.latest_offset(now, run_start)
        return BurstBacklog(
            arrived=arrived,
            records=max(0, arrived - processed),
            age_seconds=self.backlog_age(processed, now, run_start),
        )

    def arrival_times(self, n: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`Trace.arrival_time` for an array of offsets."""
        n = np.asarray(n, dtype=np.float64)
        if len(self._end) == 0:
            return np.where(n <= 0, 0.0, np.inf)
        j = np.searchsorted(self._end, n, side="left")
        valid = j < len(self._end)
        jj = np.minimum(j, len(self._end) - 1)
        t = self._starts[jj] + (n - self._begin[jj]) / self._rates[jj]
        t = np.where(valid, t, np.inf)
        return np.where(n <= 0, 0.0, t)

    def skews(self, n: np.ndarray) -> np.ndarray | None:
        """The Zipf exponent in force for each offset, or None when it is one value for all."""
        if len(self._skews) == 0 or np.all(self._skews == self._skews[0]):
            return None
        j = np.searchsorted(self._end, np.asarray(n, dtype=np.float64), side="left")
        return self._skews[np.minimum(j, len(self._skews) - 1)]

    def constant_skew(self) -> float:
        """The single Zipf exponent when the trace does not vary it."""
        return float(self._skews[0]) if len(self._skews) else self.default_skew


def _skew_of(trace: Trace, row: int, default: float) -> float:
    raw = trace.extra[row].get("skew") if trace.extra else None
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise BurstSourceError(f"{trace.source}: skew {raw!r} is not a number") from None
    if not (0 <= value <= 5):
        raise BurstSourceError(f"{trace.source}: skew {value} must be within [0, 5]")
    return value


@functools.lru_cache(maxsize=16)
def trace_clock(text: str, source: str, load_unit_rate: float | None, skew: float) -> BurstClock:
    """The clock of a trace's CSV text (``source`` names it in errors); cached by its inputs,
    as every task of a batch asks again."""
    try:
        trace = parse_trace(text, source)
    except TraceError as e:
        raise BurstSourceError(str(e)) from None
    if trace.unit == "load":
        if load_unit_rate is None:
            raise BurstSourceError(
                f"{source}: a t,load trace needs source.loadUnitRate (records/s of one load unit)"
            )
        trace = trace.scaled(load_unit_rate)
    return BurstClock(trace, skew)


def read_trace_text(source: BurstSource, text: str | None = None) -> str:
    """The source's trace CSV (``text`` when given, else its file)."""
    if text is not None:
        return text
    try:
        with open(source.trace, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise BurstSourceError(f"burst source trace {source.trace}: {e.strerror}") from None


def partition_ranges(start: int, end: int, parts: int) -> list[tuple[int, int]]:
    """``[start, end)`` in ``parts`` near-equal contiguous ranges (none empty)."""
    if end <= start:
        return []
    bounds = np.linspace(start, end, min(parts, end - start) + 1).round().astype(np.int64)
    return [(int(a), int(b)) for a, b in itertools.pairwise(bounds.tolist()) if b > a]
