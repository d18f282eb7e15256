"""The burst source as a PySpark data source: ``format("burst")``, streaming and batch.

Offsets are ``{"offset": n, "runStartUs": t0, "stream": name}``: ``n`` records read of a run
started at ``t0``. The run start travels in every offset Spark checkpoints, so after a restart
a replayed batch produces exactly the same rows, and the records that arrived while the job was
down are there as a backlog. A batch read (``start_offset``/``end_offset``, ``run_start_us``)
rereads a fixed range: the exactly-once verifier's replay.

Registered by :func:`operators.sources.burst.register`; options from
:func:`operators.sources.burst.burst_options`. The arithmetic is in
:mod:`operators.sources.burst_clock`, the records in :mod:`operators.sources.burst_records`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

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

from operators.errors import BurstSourceError
from operators.sources.burst_clock import partition_ranges
from operators.sources.burst_records import CHUNK_ROWS, SCHEMA, BurstParams, generate


class BurstPartition(InputPartition):
    """Offsets ``[start, end)`` of one task."""

    def __init__(self, start: int, end: int, run_start_us: int) -> None:
        super().__init__((start, end))
        self.start = start
        self.end = end
        self.run_start_us = run_start_us


def split(start: int, end: int, parts: int, run_start_us: int) -> list[BurstPartition]:
    """``[start, end)`` in ``parts`` near-equal contiguous ranges (none empty)."""
    return [BurstPartition(a, b, run_start_us) for a, b in partition_ranges(start, end, parts)]


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

    def _offset(self, n: int, run_start_us: int) -> dict[str, Any]:
        return {"offset": int(n), "runStartUs": int(run_start_us), "stream": self.params.stream}

    def initialOffset(self) -> dict[str, Any]:
        if self.run_start_us is None:
            self.run_start_us = round(time.time() * 1e6)
        return self._offset(0, self.run_start_us)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        run_us = int(start["runStartUs"])
        self.run_start_us = run_us  # the checkpointed start wins over the option
        latest = max(int(start["offset"]), self._now_offset(run_us))
        if isinstance(limit, ReadMaxRows):
            latest = min(latest, int(start["offset"]) + int(limit.max_rows))
        return self._offset(latest, run_us)

    def getDefaultReadLimit(self) -> ReadLimit:
        cap = self.params.max_records_per_batch
        return ReadMaxRows(cap) if cap else ReadAllAvailable()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        if self.run_start_us is None:
            return None
        return self._offset(self._now_offset(self.run_start_us), self.run_start_us)

    def prepareForTriggerAvailableNow(self) -> None:
        # The run start may still come from the checkpoint, so freeze the wall time, not an offset.
        self._until = time.time()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return split(
            int(start["offset"]), int(end["offset"]), self.params.partitions, int(end["runStartUs"])
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BurstPartition)
        return _read(self.params, partition)

    def commit(self, end: dict[str, Any]) -> None:
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
