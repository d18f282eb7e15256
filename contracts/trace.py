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

from contracts.errors import ContractError, printable


class TraceError(ContractError):
    """A trace file that cannot be used, with where and why (quoted input shown escaped)."""

    def __init__(self, message: str) -> None:
        super().__init__(printable(message))


@dataclass(frozen=True)
class Trace:
    """A piecewise-constant rate: ``values[i]`` holds on ``[times[i], times[i+1])``."""

    times: tuple[float, ...]
    values: tuple[float, ...]
    unit: Literal["input_rate", "load"]
    extra: tuple[dict[str, str], ...] = field(default=())
    source: str = "<trace>"
    _cum: tuple[float, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.times:
            raise TraceError(f"{self.source}: no rows")
        if self.times[0] != 0:
            raise TraceError(f"{self.source}: the first row must have t=0, got {self.times[0]}")
        # Records arrived before each row starts, summed in row order (as the integral would
        # be), so arrived() and arrival_time() cost a bisection, not a pass over the rows.
        cum, total = [0.0], 0.0
        for i in range(1, len(self.times)):
            total += self.values[i - 1] * (self.times[i] - self.times[i - 1])
            cum.append(total)
        object.__setattr__(self, "_cum", tuple(cum))

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
        i = bisect.bisect_left(self.times, t) - 1  # the last row starting before t
        return self._cum[i] + self.values[i] * (t - self.times[i])

    def arrival_time(self, n: float) -> float:
        """When record number ``n`` (0-based, fractional ok) arrived: the inverse of arrived().

        Returns ``math.inf`` if the trace never delivers that many (rate 0 at the end).
        """
        if n <= 0:
            return 0.0
        i = bisect.bisect_left(self._cum, n) - 1  # the last row whose start had fewer than n
        rate = self.values[i]
        if rate <= 0:  # only the last row can be short of n with a zero rate
            return math.inf
        return self.times[i] + (n - self._cum[i]) / rate

    def mean(self, duration: float | None = None) -> float:
        """Mean value over ``[0, duration)``."""
        d = duration or self.duration
        return self.arrived(d) / d

    def peak(self, duration: float | None = None) -> float:
        """Highest value in force before ``duration``."""
        d = duration or self.duration
        return max(v for t, v in zip(self.times, self.values, strict=True) if t < d)


MAX_ROWS = 100_000
"""Rows in one trace: a row a second for a day is 86,400."""
MAX_SECONDS = 7 * 86400.0
"""A trace describes a test run: a week at most (the simulator steps through every second)."""
MAX_VALUE = {"input_rate": 1e9, "load": 1000.0}
"""A billion records/s, or a thousand times one executor: beyond any job this sizes, and small
enough that no model, oracle grid or burst batch derived from it overflows memory."""
MAX_TRACE_BYTES = 16 << 20
"""16 MiB of CSV: 100,000 rows with a few extra columns."""


def parse_trace(text: str, source: str = "<trace>") -> Trace:
    """Parses trace CSV text; errors name the source, the line and what is wrong."""
    try:
        return _parse(text, source)
    except csv.Error as e:
        raise TraceError(f"{source}: not CSV ({e})") from None


def _parse(text: str, source: str) -> Trace:
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
    limit = MAX_VALUE[unit]
    times: list[float] = []
    values: list[float] = []
    extra: list[dict[str, str]] = []
    for row in reader:
        line = reader.line_num
        if len(times) >= MAX_ROWS:
            raise TraceError(f"{source}:{line}: more than {MAX_ROWS:,} rows")
        if None in row:  # DictReader puts the fields past the header under the key None
            raise TraceError(f"{source}:{line}: {len(header) + len(row[None])} fields, the header "
                             f"has {len(header)}")
        clean = {(k or "").strip(): (v or "").strip() for k, v in row.items()}
        try:
            t = float(clean["t"])
            v = float(clean[unit])
        except ValueError as e:
            raise TraceError(f"{source}:{line}: not a number ({e})") from None
        if not (math.isfinite(t) and math.isfinite(v)) or v < 0 or t < 0:
            raise TraceError(f"{source}:{line}: t and {unit} must be finite and >= 0")
        if t > MAX_SECONDS:
            raise TraceError(f"{source}:{line}: t ({t:g}) beyond {MAX_SECONDS:g} s (a week)")
        if v > limit:
            raise TraceError(f"{source}:{line}: {unit} ({v:g}) above {limit:g}")
        if times and t <= times[-1]:
            raise TraceError(f"{source}:{line}: t ({t}) must increase (previous {times[-1]})")
        times.append(t)
        values.append(v)
        extra.append({k: v for k, v in clean.items() if k not in ("t", unit)})
    return Trace(tuple(times), tuple(values), unit, tuple(extra), source)


def load_trace(path: str) -> Trace:
    """Reads a trace CSV file (UTF-8, at most MAX_TRACE_BYTES)."""
    if not path:
        raise TraceError("trace: no file named (an empty path)")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_TRACE_BYTES + 1)
    except OSError as e:
        raise TraceError(f"{path}: cannot read ({e.strerror})") from None
    if len(raw) > MAX_TRACE_BYTES:
        raise TraceError(f"{path}: larger than {MAX_TRACE_BYTES:,} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset "
                         f"{e.start})") from None
    return parse_trace(text, path)
