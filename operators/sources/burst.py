"""The burst source: deterministic records arriving at the rate a trace gives.

Record ``i`` is a pure function of ``(seed, i)`` and the trace: its key (uniform, or Zipf with
the trace's or the spec's skew), its payload ``value`` and its ``event_time`` — the run start
plus the trace's arrival time of ``i``. Schema: ``offset BIGINT, key STRING, value BIGINT,
event_time TIMESTAMP``.

Usage (the job builder does this from a manifest, through :data:`ADAPTER`)::

    register(spark)
    df = spark.readStream.format("burst").options(**burst_options(spec_source, run_start)).load()

The pieces:

* :mod:`operators.sources.burst_clock`: the trace's arithmetic (latest offset at a time, arrival
  time of an offset, backlog and its age, partition ranges), without Spark;
* :mod:`operators.sources.burst_records`: the records and the reader's parameters;
* :mod:`operators.sources.burst_datasource`: the PySpark data source (streaming and batch);
* here: the options, and the source's :class:`operators.sources.base.SourceAdapter`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contracts.streamjob import BurstSource
from operators.offsets import burst_offset, record_count
from operators.sources.base import SourceBacklog
from operators.sources.burst_clock import BurstClock

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from operators.state.committed import CommittedProgress


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
    from operators.sources.burst_records import BurstParams

    run_us = None if run_started_at is None else round(run_started_at * 1e6)
    return BurstParams.for_source(
        source, run_start_us=run_us, stream=stream, trace_text=trace_text
    ).to_options()


def register(spark: SparkSession) -> None:
    """Registers the ``burst`` data source with a session; idempotent."""
    from operators.sources.burst_datasource import BurstDataSource

    spark.dataSource.register(BurstDataSource)


class BurstBacklogProbe:
    """A burst source's backlog at ``now``: the records the trace's clock says have arrived
    since the batch's end offset, their age and the records arrived in all
    (:meth:`BurstClock.backlog`), as the Kafka probe asks the broker for its latest offsets.

    Spark's ``latestOffset`` in the progress is the source's latest *when the batch was
    planned*: an uncapped source reads all of it, so ``latest - end`` is 0 after every batch
    however long the batch ran and however much arrived meanwhile (the engine then saw no
    backlog while the age said records had waited for seconds). It stays a lower bound."""

    def __init__(self, clock: BurstClock) -> None:
        self.clock = clock

    def after_batch(self, end: object, latest: object, now: float) -> SourceBacklog | None:
        done, last = burst_offset(end), record_count(latest)
        if done is None or done.run_start is None or last is None:
            return None
        b = self.clock.backlog(done.offset, now, done.run_start)
        return SourceBacklog(max(0.0, last - done.offset, b.records), b.age_seconds, b.arrived)

    def arrived(self, end: object, now: float) -> float | None:
        """The trace's clock: records arrived by ``now`` in the run ``end`` belongs to."""
        done = burst_offset(end)
        if done is None or done.run_start is None:
            return None
        return self.clock.backlog(done.offset, now, done.run_start).arrived


class BurstAdapter:
    """:class:`operators.sources.base.SourceAdapter` of :class:`BurstSource`."""

    uses_kafka: bool = False
    cap_field: str | None = "max_records_per_batch"
    cap_option: tuple[str, str] | None = ("burst", "max_records_per_batch")
    worker_modules: tuple[str, ...] = ("operators.sources.burst_datasource",)

    def dataframe(
        self,
        spark: SparkSession,
        source: BurstSource,
        *,
        run_started_at: float | None,
        stream: str,
        streaming: bool,
    ) -> DataFrame:
        """Always a stream: the verifier's batch read is :meth:`committed_dataframe`."""
        options = burst_options(source, run_started_at, stream=stream)
        register(spark)
        return spark.readStream.format("burst").options(**options).load()

    def committed_dataframe(
        self, spark: SparkSession, source: BurstSource, stream: str, committed: CommittedProgress
    ) -> DataFrame:
        """Records ``[0, end)`` of the stream's last committed offset, at its run start."""
        register(spark)
        offset = committed.offsets.get(stream, {"offset": 0, "runStartUs": 0})
        opts = burst_options(source, stream=stream)
        opts.update(
            start_offset="0",
            end_offset=str(int(offset["offset"])),
            run_start_us=str(int(offset["runStartUs"])),
        )
        return spark.read.format("burst").options(**opts).load()

    def records_per_cap_unit(
        self, spark: SparkSession, source: BurstSource, checkpoint: str
    ) -> float | None:
        return 1.0  # the cap counts records

    def partitions(self, source: BurstSource) -> int | None:
        return source.partitions

    def backlog_probe(self, source: BurstSource) -> BurstBacklogProbe | None:
        """None when the trace cannot be read: then the backlog has records but no age."""
        try:
            return BurstBacklogProbe(BurstClock.for_source(source))
        except Exception:
            return None


ADAPTER = BurstAdapter()
