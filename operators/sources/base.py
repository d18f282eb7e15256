"""What every source gives the data plane: :class:`SourceAdapter`, and the backlog it reports.

One adapter per manifest source model (burst, files, kafka); :mod:`operators.sources` maps the
model's type to its adapter, and the job builder, the session, the runner and the verifier ask
the adapter instead of testing the source's type. Standard library only: an adapter imports
Spark and its own libraries when called, never at import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from operators.state.committed import CommittedProgress

S_contra = TypeVar("S_contra", contravariant=True)

PartitionLag = tuple[str, int, float, "float | None"]
"""Kafka: ``(topic, partition, offsets behind latest, age of the oldest unread record)``."""


@dataclass(frozen=True)
class SourceBacklog:
    """What a source says is waiting after a batch (None = unknown, never 0)."""

    records: float
    """Records arrived and not yet processed."""
    age_seconds: float | None = None
    """Age of the oldest unprocessed record; 0 when nothing waits."""
    arrived_total: float | None = None
    """Records arrived since the start (its growth is the arrival rate)."""
    source_partitions: int | None = None
    """Partitions the source reads per batch, when the offsets tell (Kafka)."""
    partition_lags: tuple[PartitionLag, ...] = ()


class BacklogProbe(Protocol):
    """Turns a batch's offsets into the backlog of one source."""

    def after_batch(self, end: object, latest: object, now: float) -> SourceBacklog | None:
        """The backlog at wall time ``now`` (Unix s) after a batch that ended at ``end`` with
        the source's latest offset at ``latest`` (a progress event's ``endOffset`` and
        ``latestOffset``: JSON text). None when the offsets are not this source's kind."""
        ...

    def arrived(self, end: object, now: float) -> float | None:
        """Records the source holds by wall time ``now``, counted as :meth:`after_batch`'s
        ``arrived_total`` counts them, asked while a batch that ends at ``end`` still runs (no
        progress comes until it commits). None when the source cannot tell without a progress
        event."""
        ...


class SourceAdapter(Protocol[S_contra]):
    """The data plane's view of one kind of manifest source (``S_contra``, its model)."""

    uses_kafka: bool
    """Whether reading it needs Spark's Kafka connector on ``spark.jars``."""
    cap_field: str | None
    """The manifest field that caps what a micro-batch reads (the admission cap the controller
    sets on a restart, :mod:`controller.core.admission`, arrives in records: see
    :meth:`records_per_cap_unit`); None when the source has no such limit."""
    cap_option: tuple[str, str] | None
    """``(format, option)``: the same cap as a ``spark.readStream`` option, for the user's own
    code; None when there is none."""
    worker_modules: tuple[str, ...]
    """Modules the source's reads import in the executors' Python workers (a Python data
    source's); () for a source Spark reads in the JVM. New executors are warmed with them
    before a restart puts the first batch on them (:mod:`operators.query.warmup`)."""

    def records_per_cap_unit(
        self, spark: SparkSession, source: S_contra, checkpoint: str
    ) -> float | None:
        """Records in one unit of :attr:`cap_field`: 1 where it counts records; a file source's
        records per file, measured on the files its checkpoint logged last. None when unknown
        (the cap is then not set)."""
        ...

    def dataframe(
        self,
        spark: SparkSession,
        source: S_contra,
        *,
        run_started_at: float | None,
        stream: str,
        streaming: bool,
    ) -> DataFrame:
        """The source as a DataFrame: a stream, or (``streaming=False``) a batch read."""
        ...

    def committed_dataframe(
        self, spark: SparkSession, source: S_contra, stream: str, committed: CommittedProgress
    ) -> DataFrame:
        """Exactly the input a checkpoint committed, as a batch read (the verifier's replay);
        :class:`operators.errors.VerifierError` when this source cannot be replayed."""
        ...

    def partitions(self, source: S_contra) -> int | None:
        """Read-stage partitions per batch when the manifest fixes them; else None."""
        ...

    def backlog_probe(self, source: S_contra) -> BacklogProbe | None:
        """What turns this source's offsets into a backlog; None when nothing can."""
        ...
