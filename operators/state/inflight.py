"""The micro-batch running now, from the checkpoint's offsets log: id, start and planned rows.

Usage (the runner, about once a second while its query is active)::

    running = batch_in_flight("/data/cp")      # None when every planned batch is committed
    running.batch, running.started_at, running.rows

Structured Streaming reports a batch only when it ends (``onQueryProgress``); ``query.status``
says a trigger is active but not which batch nor since when. The offsets log says both: Spark
writes ``offsets/<N>`` (walCommit) before it runs batch N and ``commits/<N>`` after, so an
``offsets/<N>`` without its commit is the batch in flight; its metadata line carries
``batchTimestampMs`` (the trigger time Spark fixed for the batch) and its source lines the
planned end offsets; less ``offsets/<N-1>`` (the previous batch's ends) they are the records it
reads, for offsets ``{"offset": n}`` counting records (the burst source) and Kafka's
per-partition offsets. A bare number is not trusted: the rate source's offset counts seconds
(measured on Spark 4: a 5-second batch of 500 rows logs 5); a file source's counts log entries.
Two small files per call, local or on an object store (:mod:`.store`).
A batch replayed after a restart keeps its logged timestamp: the caller bounds the start by the
query's own start. Never raises on a checkpoint being written: it answers None (unknown).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from operators.offsets import planned_rows
from operators.state.checkpoint import CheckpointError, batches, read_offsets, store_of


@dataclass(frozen=True)
class BatchInFlight:
    """A planned, uncommitted batch."""

    batch: int
    started_at: float | None
    """Unix seconds (``batchTimestampMs`` / 1000), None when the log does not say."""
    rows: float | None
    """Records the batch reads, None when the offsets do not tell."""
    ends: tuple[Any, ...] = ()
    """The batch's planned end offsets, one per source, as the log holds them: what a source's
    backlog probe measures the records arrived beyond (the runner's arrival before a commit)."""


def batch_in_flight(location: str | Path) -> BatchInFlight | None:
    """The batch planned in the offsets log and not yet committed, or None."""
    try:
        cp = store_of(str(location))
        offsets = batches(cp, "offsets")
        if not offsets:
            return None
        n = offsets[-1]
        commits = batches(cp, "commits")
        if commits and commits[-1] >= n:
            return None
        meta, ends = read_offsets(cp, n)
        ts = meta.get("batchTimestampMs")
        started = ts / 1000.0 if isinstance(ts, int | float) and ts > 0 else None
        rows = None
        if n - 1 in offsets:
            _, starts = read_offsets(cp, n - 1)
            rows = planned_rows(starts, ends)
        return BatchInFlight(n, started, rows, tuple(ends))
    except (CheckpointError, OSError, ValueError):  # purged or half-written meanwhile
        return None

