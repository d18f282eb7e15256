"""The burst source's records: pure functions of ``(seed, offset)`` and the trace.

Record ``i`` carries its offset, a key (uniform, or Zipf with the trace's or the spec's skew), a
payload ``value`` and its ``event_time``: the run start plus the trace's arrival time of ``i``
(:class:`operators.sources.burst_clock.BurstClock`). :class:`BurstParams` is everything a reader
needs, carried in the (string) data-source options; :func:`generate` makes records
``[start, end)`` as one Arrow batch; :func:`expected_key_counts` counts keys without Spark (for
checks). The Kafka load generator writes the same records (:mod:`operators.loadgen`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from operators.errors import BurstSourceError
from operators.sources.burst_clock import BurstClock, read_trace_text, trace_clock

if TYPE_CHECKING:  # the manifest model (pydantic) only in annotations: the executors' Python
    # workers import this module and never build one (operators/sources/__init__.py)
    from contracts.sources import BurstSource

SCHEMA = "offset BIGINT, key STRING, value BIGINT, event_time TIMESTAMP"
ARROW_SCHEMA = pa.schema(
    [
        ("offset", pa.int64()),
        ("key", pa.string()),
        ("value", pa.int64()),
        ("event_time", pa.timestamp("us", tz="UTC")),
    ]
)
CHUNK_ROWS = 1 << 16
"""Rows per Arrow batch handed to Spark: big enough to amortise the per-batch cost, small
enough to keep a task's memory flat."""

_MASK = (1 << 64) - 1


# --- records: pure functions of (seed, offset) -------------------------------------------------


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijective, well-spread hash of uint64s."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    out: np.ndarray = x ^ (x >> np.uint64(31))
    return out


def _hashes(seed: int, start: int, end: int) -> np.ndarray:
    salt = np.uint64((seed * 0xD1B54A32D192ED03) & _MASK)
    with np.errstate(over="ignore"):
        return _mix(np.arange(start, end, dtype=np.uint64) ^ salt)


@functools.lru_cache(maxsize=8)
def _zipf_cdf(keys: int, skew: float) -> np.ndarray:
    weights = 1.0 / np.power(np.arange(1, keys + 1, dtype=np.float64), skew)
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    cdf[-1] = 1.0
    return cdf


def _key_index(u: np.ndarray, keys: int, skew: float) -> np.ndarray:
    if skew == 0:
        return np.minimum((u * keys).astype(np.int64), keys - 1)
    return np.minimum(np.searchsorted(_zipf_cdf(keys, skew), u, side="right"), keys - 1)


def key_indices(params: BurstParams, start: int, end: int) -> np.ndarray:
    """Key numbers (0 = the most frequent under skew) of records ``[start, end)``."""
    h = _hashes(params.seed, start, end)
    u = (h >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
    clock = params.clock()
    skews = clock.skews(np.arange(start, end, dtype=np.float64))
    if skews is None:
        return _key_index(u, params.keys, clock.constant_skew())
    out = np.empty(len(u), dtype=np.int64)
    for s in np.unique(skews):
        sel = skews == s
        out[sel] = _key_index(u[sel], params.keys, float(s))
    return out


def key_name(index: int, keys: int) -> str:
    """The string key of key number ``index`` (``k`` + zero-padded number)."""
    return f"k{index:0{len(str(keys - 1))}d}"


@functools.lru_cache(maxsize=8)
def _key_names(keys: int) -> pa.Array:
    width = len(str(keys - 1))
    return pa.array([f"k{i:0{width}d}" for i in range(keys)], type=pa.string())


def generate(params: BurstParams, start: int, end: int, run_start_us: int) -> pa.RecordBatch:
    """Records ``[start, end)`` as one Arrow batch (the schema in :data:`SCHEMA`)."""
    h = _hashes(params.seed, start, end)
    idx = key_indices(params, start, end)
    offsets = np.arange(start, end, dtype=np.int64)
    times = params.clock().arrival_times(offsets.astype(np.float64))
    event_us = run_start_us + np.round(times * 1e6).astype(np.int64)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(offsets),
            _key_names(params.keys).take(pa.array(idx)),
            pa.array((h % np.uint64(1000)).astype(np.int64)),
            pa.array(event_us, type=pa.timestamp("us", tz="UTC")),
        ],
        schema=ARROW_SCHEMA,
    )


def expected_key_counts(
    source: BurstSource, n_records: int, *, start: int = 0, trace_text: str | None = None
) -> dict[str, int]:
    """How many of records ``[start, n_records)`` carry each key (keys with 0 left out)."""
    params = BurstParams.for_source(source, run_start_us=0, trace_text=trace_text)
    counts = np.zeros(source.keys, dtype=np.int64)
    for lo in range(start, n_records, 1 << 20):
        hi = min(n_records, lo + (1 << 20))
        counts += np.bincount(key_indices(params, lo, hi), minlength=source.keys)
    return {key_name(i, source.keys): int(c) for i, c in enumerate(counts) if c}


@dataclass(frozen=True)
class BurstParams:
    """Everything a reader needs, parsed from the (string) data-source options."""

    trace_text: str
    trace_name: str
    keys: int
    skew: float
    partitions: int
    seed: int
    load_unit_rate: float | None
    max_records_per_batch: int | None
    run_start_us: int | None
    stream: str

    @classmethod
    def for_source(
        cls,
        source: BurstSource,
        *,
        run_start_us: int | None,
        stream: str = "main",
        trace_text: str | None = None,
    ) -> BurstParams:
        params = cls(
            trace_text=read_trace_text(source, trace_text),
            trace_name=source.trace,
            keys=source.keys,
            skew=source.skew,
            partitions=source.partitions,
            seed=source.seed,
            load_unit_rate=source.load_unit_rate,
            max_records_per_batch=source.max_records_per_batch,
            run_start_us=run_start_us,
            stream=stream,
        )
        params.clock()  # fail here, on the driver, not in a task
        return params

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> BurstParams:
        def opt(name: str) -> str | None:
            value = options.get(name)
            return None if value in (None, "") else str(value)

        text = opt("trace_csv")
        if text is None:
            raise BurstSourceError("burst source: option trace_csv (the trace CSV text) is missing")
        lur, cap, run = opt("load_unit_rate"), opt("max_records_per_batch"), opt("run_start_us")
        return cls(
            trace_text=text,
            trace_name=opt("trace_name") or "<trace>",
            keys=int(opt("keys") or 10_000),
            skew=float(opt("skew") or 0.0),
            partitions=int(opt("partitions") or 4),
            seed=int(opt("seed") or 0),
            load_unit_rate=float(lur) if lur else None,
            max_records_per_batch=int(cap) if cap else None,
            run_start_us=int(run) if run else None,
            stream=opt("stream") or "main",
        )

    def to_options(self) -> dict[str, str]:
        out = {
            "trace_csv": self.trace_text,
            "trace_name": self.trace_name,
            "keys": str(self.keys),
            "skew": repr(self.skew),
            "partitions": str(self.partitions),
            "seed": str(self.seed),
            "stream": self.stream,
        }
        if self.load_unit_rate is not None:
            out["load_unit_rate"] = repr(self.load_unit_rate)
        if self.max_records_per_batch is not None:
            out["max_records_per_batch"] = str(self.max_records_per_batch)
        if self.run_start_us is not None:
            out["run_start_us"] = str(self.run_start_us)
        return out

    def clock(self) -> BurstClock:
        return trace_clock(self.trace_text, self.trace_name, self.load_unit_rate, self.skew)
