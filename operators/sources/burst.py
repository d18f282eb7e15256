"""The burst source: deterministic records arriving at the rate a trace gives.

Record ``i`` is a pure function of ``(seed, i)`` and the trace: its key (uniform, or Zipf with
the trace's or the spec's skew), its payload ``value`` and its ``event_time`` — the run start
plus ``trace.arrival_time(i)``. The run start travels in every offset Spark checkpoints
(``runStartUs``), so after a restart, a replayed batch produces exactly the same rows, and the
records that arrived while the job was down are there as a backlog.

Schema: ``offset BIGINT, key STRING, value BIGINT, event_time TIMESTAMP``.

Usage (the job builder does this from a manifest)::

    spark.dataSource.register(BurstDataSource)
    df = spark.readStream.format("burst").options(**burst_options(spec_source, run_start)).load()

The same source reads a fixed range in batch mode (``start_offset``/``end_offset`` options); the
exactly-once verifier uses that to recompute what the job should have produced.

The pure pieces the runtime and the verifier need are :class:`BurstClock` (records arrived at a
wall time, arrival time of an offset, hence backlog age) and :func:`expected_key_counts`.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from contracts.streamjob import BurstSource
from contracts.trace import Trace, TraceError, parse_trace

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


class BurstSourceError(ValueError):
    """A burst source that cannot run (bad trace, t,load without load_unit_rate)."""


# --- the clock: trace arithmetic, vectorised ----------------------------------------------------


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
        return _clock(
            _trace_text(source, trace_text), source.trace, source.load_unit_rate, source.skew
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
def _clock(text: str, source: str, load_unit_rate: float | None, skew: float) -> BurstClock:
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


def _trace_text(source: BurstSource, text: str | None) -> str:
    if text is not None:
        return text
    try:
        with open(source.trace, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise BurstSourceError(f"burst source trace {source.trace}: {e.strerror}") from None


# --- records: pure functions of (seed, offset) -------------------------------------------------


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijective, well-spread hash of uint64s."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


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


# --- options: what the driver hands to Spark ---------------------------------------------------


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
            trace_text=_trace_text(source, trace_text),
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
        return _clock(self.trace_text, self.trace_name, self.load_unit_rate, self.skew)


def burst_options(
    source: BurstSource,
    run_started_at: float | None = None,
    *,
    stream: str = "main",
    trace_text: str | None = None,
) -> dict[str, str]:
    """Data-source options for a manifest's burst source.

    ``run_started_at`` (Unix s) only matters for a fresh checkpoint: afterwards the run start
    comes from the checkpointed offsets. None = the moment the query plans its first batch.
    """
    run_us = None if run_started_at is None else round(run_started_at * 1e6)
    return BurstParams.for_source(
        source, run_start_us=run_us, stream=stream, trace_text=trace_text
    ).to_options()


# --- the Spark data source ---------------------------------------------------------------------


class BurstPartition(InputPartition):
    """Offsets ``[start, end)`` of one task."""

    def __init__(self, start: int, end: int, run_start_us: int) -> None:
        super().__init__((start, end))
        self.start = start
        self.end = end
        self.run_start_us = run_start_us


def split(start: int, end: int, parts: int, run_start_us: int) -> list[BurstPartition]:
    """``[start, end)`` in ``parts`` near-equal contiguous ranges (none empty)."""
    if end <= start:
        return []
    bounds = np.linspace(start, end, min(parts, end - start) + 1).round().astype(np.int64)
    return [
        BurstPartition(int(a), int(b), run_start_us)
        for a, b in itertools.pairwise(bounds.tolist())
        if b > a
    ]


def _read(params: BurstParams, partition: BurstPartition) -> Iterator[pa.RecordBatch]:
    for lo in range(partition.start, partition.end, CHUNK_ROWS):
        yield generate(params, lo, min(partition.end, lo + CHUNK_ROWS), partition.run_start_us)


class BurstStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{"offset": n, "runStartUs": t0, "stream": name}``: ``n`` records read."""

    def __init__(self, params: BurstParams) -> None:
        self.params = params
        self.run_start_us = params.run_start_us
        self._until: float | None = None  # availableNow: wall time of the last record to read

    def _now_offset(self, run_start_us: int) -> int:
        now = time.time() if self._until is None else self._until
        return self.params.clock().latest_offset(now, run_start_us / 1e6)

    def _offset(self, n: int, run_start_us: int) -> dict:
        return {"offset": int(n), "runStartUs": int(run_start_us), "stream": self.params.stream}

    def initialOffset(self) -> dict:
        if self.run_start_us is None:
            self.run_start_us = round(time.time() * 1e6)
        return self._offset(0, self.run_start_us)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        run_us = int(start["runStartUs"])
        self.run_start_us = run_us  # the checkpointed start wins over the option
        latest = max(int(start["offset"]), self._now_offset(run_us))
        if isinstance(limit, ReadMaxRows):
            latest = min(latest, int(start["offset"]) + int(limit.max_rows))
        return self._offset(latest, run_us)

    def getDefaultReadLimit(self) -> ReadLimit:
        cap = self.params.max_records_per_batch
        return ReadMaxRows(cap) if cap else ReadAllAvailable()

    def reportLatestOffset(self) -> dict | None:
        if self.run_start_us is None:
            return None
        return self._offset(self._now_offset(self.run_start_us), self.run_start_us)

    def prepareForTriggerAvailableNow(self) -> None:
        # The run start may still come from the checkpoint, so freeze the wall time, not an offset.
        self._until = time.time()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return split(
            int(start["offset"]), int(end["offset"]), self.params.partitions, int(end["runStartUs"])
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BurstPartition)
        return _read(self.params, partition)

    def commit(self, end: dict) -> None:
        """Nothing to release: records are recomputed from their offsets."""


class BurstBatchReader(DataSourceReader):
    """A fixed range ``[start_offset, end_offset)`` (needs ``run_start_us``): for verifiers."""

    def __init__(self, params: BurstParams, start: int, end: int) -> None:
        if params.run_start_us is None:
            raise BurstSourceError("burst source (batch): option run_start_us is required")
        self.params = params
        self.start = start
        self.end = end

    def partitions(self) -> Sequence[InputPartition]:
        assert self.params.run_start_us is not None
        parts = split(self.start, self.end, self.params.partitions, self.params.run_start_us)
        return parts or [BurstPartition(0, 0, self.params.run_start_us)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BurstPartition)
        return _read(self.params, partition)


class BurstDataSource(DataSource):
    """``format("burst")``; options from :func:`burst_options`."""

    @classmethod
    def name(cls) -> str:
        return "burst"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: object) -> DataSourceStreamReader:
        return BurstStreamReader(BurstParams.from_options(self.options))

    def reader(self, schema: object) -> DataSourceReader:
        params = BurstParams.from_options(self.options)
        start = int(self.options.get("start_offset") or 0)
        end = self.options.get("end_offset")
        if end in (None, ""):
            raise BurstSourceError("burst source (batch): option end_offset is required")
        return BurstBatchReader(params, start, int(str(end)))


def parse_offset(raw: str | Mapping[str, object]) -> dict:
    """A burst offset from the checkpoint's offsets log (a JSON line) as a dict."""
    value = json.loads(raw) if isinstance(raw, str) else dict(raw)
    if not isinstance(value, dict) or "offset" not in value or "runStartUs" not in value:
        raise BurstSourceError(f"not a burst source offset: {raw!r}")
    return value


@dataclass(frozen=True)
class BurstBacklog:
    """The backlog of a burst source at one wall time."""

    arrived: int
    """Records arrived since the run start (the latest offset)."""
    records: int
    """Arrived but not yet processed (``arrived`` - processed end offset)."""
    age_seconds: float
    """Age of the oldest unprocessed record; 0 when nothing waits."""


def burst_backlog(
    source: BurstSource, end_offset: str | Mapping[str, object], now: float
) -> BurstBacklog:
    """Backlog at wall time ``now`` (Unix s) after a batch that ended at ``end_offset`` (the
    progress's ``sources[i].endOffset``, JSON text or dict, which carries the run start)."""
    offset = parse_offset(end_offset)
    clock = BurstClock.for_source(source)
    run_start = int(offset["runStartUs"]) / 1e6
    processed = int(offset["offset"])
    arrived = clock.latest_offset(now, run_start)
    return BurstBacklog(
        arrived=arrived,
        records=max(0, arrived - processed),
        age_seconds=clock.backlog_age(processed, now, run_start),
    )
