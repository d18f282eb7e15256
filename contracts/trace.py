"""Burst traces: input rate over time, read from a CSV with a header.

Columns: ``t`` (seconds from start) and either ``input_rate`` (records/s) or ``load`` (multiples
of one executor's measured capacity for the job). Each value holds until the next row; the run
lasts until the last row's ``t`` unless told otherwise. Further columns (``skew``, or everything a
recorded ``timeline.csv`` carries) are kept per row, so a recorded run replays as a trace.

Used by the simulator and by the runner's burst source, so both mean the same by a trace.
"""

from __future__ import annotations

import bisect
import csv
import io
import math
from dataclasses import dataclass, field
from typing import Literal

from contracts.errors import ContractError


class TraceError(ContractError):
    """A trace file that cannot be used, with where and why."""


@dataclass(frozen=True)
class Trace:
    """A piecewise-constant rate: ``values[i]`` holds on ``[times[i], times[i+1])``."""

    times: tuple[float, ...]
    values: tuple[float, ...]
    unit: Literal["input_rate", "load"]
    extra: tuple[dict[str, str], ...] = field(default=())
    source: str = "<trace>"

    def __post_init__(self) -> None:
        if not self.times:
            raise TraceError(f"{self.source}: no rows")
        if self.times[0] != 0:
            raise TraceError(f"{self.source}: the first row must have t=0, got {self.times[0]}")

    @property
    def duration(self) -> float:
        """The last row's t (the default run length); at least 1 s."""
        return max(self.times[-1], 1.0)

    def scaled(self, load_unit_rate: float) -> Trace:
        """A ``load`` trace as records/s, one load unit being ``load_unit_rate`` records/s."""
        if self.unit == "input_rate":
            return self
        return Trace(
            self.times,
            tuple(v * load_unit_rate for v in self.values),
            "input_rate",
            self.extra,
            self.source,
        )

    def _index(self, t: float) -> int:
        return max(0, bisect.bisect_right(self.times, t) - 1)

    def rate_at(self, t: float) -> float:
        """The value in force at time ``t`` (s)."""
        return self.values[self._index(t)] if t >= 0 else 0.0

    def extra_at(self, t: float, column: str) -> str | None:
        """An optional column's value in force at ``t``."""
        if not self.extra:
            return None
        return self.extra[self._index(t)].get(column) or None

    def arrived(self, t: float) -> float:
        """Records arrived in ``[0, t)``: the integral of the rate."""
        if t <= 0:
            return 0.0
        total = 0.0
        for i, start in enumerate(self.times):
            if start >= t:
                break
            end = self.times[i + 1] if i + 1 < len(self.times) else math.inf
            total += self.values[i] * (min(end, t) - start)
        return total

    def arrival_time(self, n: float) -> float:
        """When record number ``n`` (0-based, fractional ok) arrived: the inverse of arrived().

        Returns ``math.inf`` if the trace never delivers that many (rate 0 at the end).
        """
        if n <= 0:
            return 0.0
        total = 0.0
        for i, start in enumerate(self.times):
            end = self.times[i + 1] if i + 1 < len(self.times) else math.inf
            rate = self.values[i]
            seg = rate * (end - start) if math.isfinite(end) else math.inf
            if rate > 0 and total + seg >= n:
                return start + (n - total) / rate
            if math.isfinite(seg):
                total += seg
        return math.inf

    def mean(self, duration: float | None = None) -> float:
        """Mean value over ``[0, duration)``."""
        d = duration or self.duration
        return self.arrived(d) / d

    def peak(self, duration: float | None = None) -> float:
        """Highest value in force before ``duration``."""
        d = duration or self.duration
        return max(v for t, v in zip(self.times, self.values, strict=True) if t < d)


def parse_trace(text: str, source: str = "<trace>") -> Trace:
    """Parses trace CSV text; errors name the source, the line and what is wrong."""
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    if "t" not in header:
        raise TraceError(f"{source}: header must start with t (got {','.join(header) or 'none'})")
    if "input_rate" in header:
        unit: Literal["input_rate", "load"] = "input_rate"
    elif "load" in header:
        unit = "load"
    else:
        raise TraceError(f"{source}: header needs an input_rate or a load column")
    times: list[float] = []
    values: list[float] = []
    extra: list[dict[str, str]] = []
    for row in reader:
        line = reader.line_num
        clean = {(k or "").strip(): (v or "").strip() for k, v in row.items()}
        try:
            t = float(clean["t"])
            v = float(clean[unit])
        except ValueError as e:
            raise TraceError(f"{source}:{line}: not a number ({e})") from None
        if not (math.isfinite(t) and math.isfinite(v)) or v < 0 or t < 0:
            raise TraceError(f"{source}:{line}: t and {unit} must be finite and >= 0")
        if times and t <= times[-1]:
            raise TraceError(f"{source}:{line}: t ({t}) must increase (previous {times[-1]})")
        times.append(t)
        values.append(v)
        extra.append({k: v for k, v in clean.items() if k not in ("t", unit)})
    return Trace(tuple(times), tuple(values), unit, tuple(extra), source)


def load_trace(path: str) -> Trace:
    """Reads a trace CSV file."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise TraceError(f"{path}: cannot read ({e.strerror})") from None
    return parse_trace(text, path)
