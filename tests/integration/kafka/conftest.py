"""Fixtures of the Kafka tier: the test bed's KRaft broker (hack/testbed/testbed_kafka.py), a
Spark standalone mini-cluster, a local Spark session with the connector's jars for read-backs
and the verifier, and StreamJob manifests reading and writing Kafka.

Without Java, pyspark, confluent-kafka or the resolved jars the tests skip locally (naming the
command that installs them) and FAIL in CI (``CI=true``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.realcomponents import require_spark, unavailable

VALUE_SCHEMA = "seq BIGINT, key STRING, value BIGINT, event_time TIMESTAMP"


@pytest.fixture(scope="package")
def broker() -> Iterator[str]:
    """The bootstrap address of the test bed's broker (started unless one of ours runs)."""
    require_spark()
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        unavailable("confluent-kafka is not installed (make setup)")
    import testbed_kafka

    try:
        testbed_kafka.spark_kafka_jars()
        bed = testbed_kafka.ensure_up(user=os.getpid())
    except testbed_kafka.KafkaMissing as e:
        unavailable(str(e))
    yield bed.bootstrap
    if os.environ.get("TESTBED_KEEP") != "1":
        testbed_kafka.release(os.getpid())


@pytest.fixture(scope="package")
def cluster(broker: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Two 1-core workers: room for 1 -> 2 executors (the machine has two cores)."""
    from operators.query.cluster import MiniCluster

    logs = tmp_path_factory.mktemp("cluster")
    with MiniCluster(workers=2, cores_per_worker=1, memory_per_worker="1g", log_dir=logs) as c:
        yield c


@pytest.fixture(scope="package")
def spark(broker: str) -> Iterator[Any]:
    """A local session in the test process with the Kafka connector, for read-backs."""
    from tests.integration.kafka.windows import readback_session

    session = readback_session("kafka-tier-readback")
    yield session
    session.stop()


def topic_name(prefix: str) -> str:
    """A fresh topic per test (the broker is shared by the whole tier)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(30)


def write_kafka_job(
    directory: Path,
    *,
    name: str,
    bootstrap: str,
    topic: str,
    out_topic: str,
    stateful: bool,
    max_offsets: int | None = None,
    min_partitions: int | None = None,
    state_partitions: int = 2,
    trigger: float = 1.0,
) -> Path:
    """A StreamJob reading the load generator's records from ``topic`` and writing ``out_topic``:
    stateful = count and sum per key (update mode), else parse + filter + project (append)."""
    directory.mkdir(parents=True, exist_ok=True)
    source: dict[str, Any] = {"type": "kafka", "bootstrapServers": bootstrap, "topic": topic,
                              "startingOffsets": "earliest"}  # fmt: skip
    if max_offsets:
        source["maxOffsetsPerTrigger"] = max_offsets
    if min_partitions:
        source["minPartitions"] = min_partitions
    parse = {"type": "parse", "name": "parse", "format": "json", "schema": VALUE_SCHEMA}
    if stateful:
        pipeline = [parse, {"type": "aggregate", "name": "per-key", "keys": ["key"],
                            "aggregations": [{"fn": "count"},
                                             {"fn": "sum", "column": "value", "as": "total"}]}]
        mode = "update"
    else:
        pipeline = [parse,
                    {"type": "filter", "name": "valid", "condition": "value >= 0"},
                    {"type": "project", "name": "shape",
                     "columns": ["seq", "key", "value * 2 AS doubled", "event_time"]}]
        mode = "append"  # fmt: skip
    job = {
        "apiVersion": "stream-autoscaler.io/v1alpha1",
        "kind": "StreamJob",
        "metadata": {"name": name},
        "spec": {
            "source": source,
            "pipeline": pipeline,
            "sink": {"type": "kafka", "bootstrapServers": bootstrap, "topic": out_topic,
                     "outputMode": mode},
            "trigger": {"intervalSeconds": trigger},
            "checkpoint": {"location": str(directory / "cp")},
            "statePartitions": state_partitions,
            "executors": {"initial": 1, "cores": 1, "memory": "512m"},
        },
    }  # fmt: skip
    path = directory / "job.yaml"
    path.write_text(yaml.safe_dump(job), encoding="utf-8")
    return path


def trace_file(directory: Path, rows: list[tuple[float, float]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "trace.csv"
    path.write_text("t,input_rate\n" + "".join(f"{t:g},{r:g}\n" for t, r in rows))
    return path
