"""The Kafka source: topics read by Spark's Kafka connector, and the Kafka backlog.

Columns a job sees (the parse operator reads ``value`` by default)::

    value STRING, kafka_key STRING, kafka_topic STRING, kafka_partition INT,
    kafka_offset BIGINT, kafka_timestamp TIMESTAMP

The connector's own names (key, topic, partition, offset, timestamp) are prefixed so that the
fields a ``parse`` operator takes out of ``value`` (often a ``key`` or a ``timestamp``) never
collide with them. Offsets live in the checkpoint (``{"topic": {"0": 1234, ...}}``), so a
restarted query resumes exactly where the last committed batch ended.

The connector's jars (spark-sql-kafka-0-10, its token provider, kafka-clients, commons-pool2)
are resolved from Maven Central by ``hack/tools/kafka/resolve.sh`` into
``~/.cache/stream-autoscaler/kafka/spark-kafka-<version>/``; :func:`kafka_jars` finds them for
``spark.jars`` (``STREAM_AUTOSCALER_KAFKA_JARS``, a directory or comma-separated paths, wins).
The connector's version is :data:`SPARK_KAFKA_VERSION`, not read from ``hack/`` at run time:
an installed package (the image) has no ``hack/``.

The backlog (:class:`KafkaLagProbe`): per topic-partition, the offsets behind the broker's
latest (high watermark) after the last committed batch, and the age of the oldest unprocessed
record: the timestamp of the record at the committed end offset, read with one small fetch per
lagging partition (confluent-kafka). Without confluent-kafka the records behind come from
Spark's ``latestOffset`` and the age is unknown (``None``, never 0).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from contracts.streamjob import KafkaSource
from operators.errors import KafkaSourceError, VerifierError
from operators.jars import JarSet
from operators.offsets import TopicOffsets, topic_offsets, topic_offsets_json
from operators.sources.base import SourceBacklog

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from operators.state.committed import CommittedProgress

COLUMNS = (
    "CAST(value AS STRING) AS value",
    "CAST(key AS STRING) AS kafka_key",
    "topic AS kafka_topic",
    "partition AS kafka_partition",
    "offset AS kafka_offset",
    "timestamp AS kafka_timestamp",
)
JARS_ENV = "STREAM_AUTOSCALER_KAFKA_JARS"
SPARK_KAFKA_VERSION = "4.2.0"
"""spark-sql-kafka-0-10_2.13, whose jars :func:`kafka_jars` looks for in the cache. The same
value as ``SPARK_KAFKA_VERSION`` in hack/tools/kafka/versions.env, which resolves them (a unit
test holds the two equal; that file says why 4.2.0 on PySpark 4.3)."""
KAFKA_JARS = JarSet(
    what="Spark's Kafka connector jars", env=JARS_ENV, cache_env="SA_KAFKA_CACHE",
    cache_name="kafka", dirname=f"spark-kafka-{SPARK_KAFKA_VERSION}",
    script="hack/tools/kafka/resolve.sh",
)
PROBE_TIMEOUT_SECONDS = 2.0
"""Longest the lag probe waits on the broker per progress event: the loopback broker answers in
milliseconds; a broker that does not answer in 2 s leaves the age unknown for that batch rather
than delay the next progress event."""

# --- jars ------------------------------------------------------------------------------------


def kafka_jars() -> list[str]:
    """Local paths of the connector jars for ``spark.jars``; KafkaSourceError if not resolved."""
    try:
        return KAFKA_JARS.paths()
    except ValueError as e:
        raise KafkaSourceError(str(e)) from None


# --- reading ---------------------------------------------------------------------------------


def kafka_options(source: KafkaSource, *, streaming: bool = True) -> dict[str, str]:
    """Connector options for a manifest's Kafka source."""
    topics = [t.strip() for t in source.topic.split(",") if t.strip()]
    if not topics:
        raise KafkaSourceError(f"kafka source: topic {source.topic!r} names no topic")
    opts = {
        "kafka.bootstrap.servers": source.bootstrap_servers,
        "subscribe": ",".join(topics),
        "startingOffsets": source.starting_offsets,
        # Records deleted before they were read are lost input: fail loudly, never skip.
        "failOnDataLoss": "true",
    }
    if streaming and source.max_offsets_per_trigger is not None:
        opts["maxOffsetsPerTrigger"] = str(source.max_offsets_per_trigger)
    if source.min_partitions is not None:
        opts["minPartitions"] = str(source.min_partitions)
    return opts


def read_kafka(
    spark: SparkSession,
    source: KafkaSource,
    *,
    streaming: bool = True,
    starting: TopicOffsets | None = None,
    ending: TopicOffsets | None = None,
) -> DataFrame:
    """The topic as a DataFrame with :data:`COLUMNS`. Batch mode (``streaming=False``) reads
    ``[starting, ending)`` (the verifier replays exactly the committed offsets)."""
    opts = kafka_options(source, streaming=streaming)
    if not streaming:
        if starting is not None:
            opts["startingOffsets"] = topic_offsets_json(starting)
        opts["endingOffsets"] = topic_offsets_json(ending) if ending is not None else "latest"
    reader = spark.readStream if streaming else spark.read
    try:
        return reader.format("kafka").options(**opts).load().selectExpr(*COLUMNS)
    except Exception as e:  # AnalysisException: DATA_SOURCE_NOT_FOUND without the connector
        if "DATA_SOURCE_NOT_FOUND" in str(e) or "Failed to find" in str(e):
            raise KafkaSourceError(
                "kafka source: Spark's Kafka connector is not on this session's spark.jars "
                "(the runner adds it from the cache `make tools` fills; see kafka_jars())"
            ) from None
        raise


# --- the backlog -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionLag:
    """One topic-partition after the last committed batch."""

    topic: str
    partition: int
    behind: int
    """Offsets between the committed end and the broker's latest."""
    age_seconds: float | None
    """Age of the oldest unprocessed record (its Kafka timestamp); 0 when nothing waits."""


@dataclass(frozen=True)
class KafkaBacklog:
    """The backlog of one Kafka source at one wall time."""

    records: int
    age_seconds: float | None
    latest_total: int
    """Sum of the latest offsets: its growth is the arrival rate."""
    partitions: int
    """Topic-partitions subscribed."""
    lags: tuple[PartitionLag, ...] = field(default=())


class KafkaLagProbe:
    """Reads latest offsets and oldest-record timestamps from the broker (confluent-kafka).

    One consumer with no group (nothing committed, nothing rebalanced), created on first use,
    used by one thread at a time: the listener's after a batch, the runner's watch during one
    (:meth:`arrived`).
    """

    def __init__(self, source: KafkaSource, timeout: float = PROBE_TIMEOUT_SECONDS) -> None:
        self.source = source
        self.timeout = timeout
        self._consumer: Any = None
        self._unavailable = False
        self._lock = threading.Lock()

    def _client(self) -> Any:
        if self._consumer is None and not self._unavailable:
            try:
                from confluent_kafka import Consumer
            except ImportError:
                self._unavailable = True
                return None
            self._consumer = Consumer({
                "bootstrap.servers": self.source.bootstrap_servers,
                "group.id": "stream-autoscaler-lag-probe",  # required; never joined or committed
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "fetch.max.bytes": 1 << 20,
                "log_level": 3,
            })  # fmt: skip
        return self._consumer

    def backlog(
        self, end: TopicOffsets, spark_latest: TopicOffsets | None, now: float | None = None
    ) -> KafkaBacklog:
        """The backlog after a batch that ended at ``end`` (the progress's ``endOffset``)."""
        with self._lock:
            return self._backlog(end, spark_latest, now)

    def _backlog(
        self, end: TopicOffsets, spark_latest: TopicOffsets | None, now: float | None
    ) -> KafkaBacklog:
        consumer = self._client()
        latest = dict(spark_latest or {})
        if consumer is not None:
            latest = self._watermarks(consumer, end) or latest
        now = time.time() if now is None else now
        behind: dict[tuple[str, int], int] = {}
        for topic, parts in latest.items():
            for p, hi in parts.items():
                behind[(topic, p)] = max(0, hi - end.get(topic, {}).get(p, 0))
        ages: dict[tuple[str, int], float] | None = None
        if consumer is not None:
            lagging = {tp: end.get(tp[0], {}).get(tp[1], 0) for tp, n in behind.items() if n > 0}
            ages = self._ages(consumer, lagging, now) if lagging else {}
        lags = tuple(
            PartitionLag(
                t, p, n,
                None if ages is None else (ages.get((t, p)) if n > 0 else 0.0),
            )
            for (t, p), n in sorted(behind.items())
        )  # fmt: skip
        known_ages = [lag.age_seconds for lag in lags if lag.age_seconds is not None]
        age = None if ages is None or len(known_ages) < len(lags) else max(known_ages, default=0.0)
        return KafkaBacklog(
            records=sum(behind.values()),
            age_seconds=age,
            latest_total=sum(hi for parts in latest.values() for hi in parts.values()),
            partitions=len(behind),
            lags=lags,
        )

    def after_batch(self, end: object, latest: object, now: float) -> SourceBacklog | None:
        """:class:`operators.sources.base.BacklogProbe`: None unless ``end`` is a Kafka offset;
        the partitions are the topic's, or ``minPartitions`` when larger."""
        done = topic_offsets(end)
        if done is None:
            return None
        kb = self.backlog(done, topic_offsets(latest), now)
        return SourceBacklog(
            kb.records,
            kb.age_seconds,
            kb.latest_total,
            max(kb.partitions, self.source.min_partitions or 0),
            tuple((lag.topic, lag.partition, lag.behind, lag.age_seconds) for lag in kb.lags),
        )

    def arrived(self, end: object, now: float) -> float | None:
        """The topics' high watermarks summed (what ``latest_total`` sums after a batch); None
        without the broker: Spark's own latest offset is only read when a batch is planned."""
        done = topic_offsets(end)
        if done is None:
            return None
        with self._lock:
            consumer = self._client()
            latest = self._watermarks(consumer, done) if consumer is not None else None
        if latest is None:
            return None
        return float(sum(hi for parts in latest.values() for hi in parts.values()))

    def _watermarks(self, consumer: Any, end: TopicOffsets) -> TopicOffsets | None:
        from confluent_kafka import TopicPartition

        out: TopicOffsets = {}
        try:
            for topic in end:
                meta = consumer.list_topics(topic, timeout=self.timeout).topics.get(topic)
                if meta is None or meta.error is not None:
                    return None
                for p in meta.partitions:
                    _, hi = consumer.get_watermark_offsets(
                        TopicPartition(topic, p), timeout=self.timeout, cached=False
                    )
                    out.setdefault(topic, {})[p] = int(hi)
        except Exception:  # KafkaException: broker unreachable -> fall back to Spark's view
            return None
        return out

    def _ages(
        self, consumer: Any, first_unread: dict[tuple[str, int], int], now: float
    ) -> dict[tuple[str, int], float]:
        """Age of the record at each partition's first unread offset."""
        from confluent_kafka import TopicPartition

        out: dict[tuple[str, int], float] = {}
        try:
            consumer.assign([TopicPartition(t, p, off) for (t, p), off in first_unread.items()])
            deadline = time.monotonic() + self.timeout
            while len(out) < len(first_unread) and time.monotonic() < deadline:
                for msg in consumer.consume(len(first_unread), timeout=0.2):
                    if msg.error() is not None:
                        continue
                    tp = (msg.topic(), msg.partition())
                    if tp in first_unread and tp not in out:
                        _, ts_ms = msg.timestamp()
                        if ts_ms and ts_ms > 0:
                            out[tp] = max(0.0, now - ts_ms / 1000.0)
                        consumer.pause([TopicPartition(tp[0], tp[1])])
            consumer.unassign()
        except Exception:
            return out
        return out

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


class KafkaAdapter:
    """:class:`operators.sources.base.SourceAdapter` of :class:`KafkaSource`."""

    uses_kafka: bool = True
    cap_field: str | None = "max_offsets_per_trigger"
    cap_option: tuple[str, str] | None = ("kafka", "maxOffsetsPerTrigger")
    worker_modules: tuple[str, ...] = ()

    def dataframe(
        self,
        spark: SparkSession,
        source: KafkaSource,
        *,
        run_started_at: float | None,
        stream: str,
        streaming: bool,
    ) -> DataFrame:
        return read_kafka(spark, source, streaming=streaming)

    def committed_dataframe(
        self, spark: SparkSession, source: KafkaSource, stream: str, committed: CommittedProgress
    ) -> DataFrame:
        """The topic from the query's initial offsets (``sources/0/0``) to the end offsets of
        the last committed batch; only the main input can be replayed."""
        if stream != "main":
            raise VerifierError(
                f"input {stream!r} is a kafka source; only the main one is replayed"
            )
        start = committed.kafka_start
        if start is None:
            if committed.last_committed_batch is not None:
                raise VerifierError("checkpoint has committed batches but no sources/0/0 offsets")
            # Nothing committed: nothing expected (an empty read with the source's columns).
            opts = {**kafka_options(source, streaming=False), "endingOffsets": "earliest"}
            return spark.read.format("kafka").options(**opts).load().selectExpr(*COLUMNS).limit(0)
        end = committed.kafka_end if committed.kafka_end is not None else start
        return read_kafka(spark, source, streaming=False, starting=start, ending=end)

    def records_per_cap_unit(
        self, spark: SparkSession, source: KafkaSource, checkpoint: str
    ) -> float | None:
        return 1.0  # the cap counts records

    def partitions(self, source: KafkaSource) -> int | None:
        """None: the count is the topic's (or ``minPartitions``); the backlog probe learns it
        from each batch's offsets."""
        return None

    def backlog_probe(self, source: KafkaSource) -> KafkaLagProbe:
        return KafkaLagProbe(source)


ADAPTER = KafkaAdapter()
