"""The source registry, the Kafka connector's pinned version, the error hierarchy, the unit
tier's promise (the sources' arithmetic imports without pyspark or pyarrow) and the executors'
(their Python workers import the burst reader without the driver's modules)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from contracts.streamjob import BurstSource, FileSource, KafkaSource, StreamJobSpec
from operators import errors
from operators.errors import OperatorsError, SourceError
from operators.sources.base import SourceAdapter
from operators.sources.burst import BurstBacklogProbe
from operators.sources.kafka import SPARK_KAFKA_VERSION, KafkaLagProbe
from operators.sources.registry import ADAPTERS, adapter_for, source_partitions, uses_kafka

ROOT = Path(__file__).resolve().parents[4]
BURST = BurstSource(trace="/nonexistent/trace.csv", partitions=6)
FILES = FileSource(path="/tmp/in")
KAFKA = KafkaSource(bootstrap_servers="127.0.0.1:9092", topic="t", min_partitions=3)


def test_every_source_model_has_an_adapter_with_the_whole_protocol() -> None:
    models = {m for m in (BurstSource, FileSource, KafkaSource)}
    assert set(ADAPTERS) == models
    members = [n for n in vars(SourceAdapter) if not n.startswith("_")]
    members += list(SourceAdapter.__annotations__)
    for adapter in ADAPTERS.values():
        assert all(hasattr(adapter, m) for m in members), adapter


def test_an_unknown_source_is_a_source_error() -> None:
    with pytest.raises(SourceError, match="unknown source type dict"):
        adapter_for({"type": "burst"})


@pytest.mark.parametrize(
    ("source", "partitions", "probe", "kafka"),
    [(BURST, 6, type(None), False), (FILES, None, type(None), False),
     (KAFKA, None, KafkaLagProbe, True)],
    ids=["burst", "files", "kafka"],
)
def test_what_each_adapter_says(source, partitions, probe, kafka) -> None:
    adapter = adapter_for(source)
    assert source_partitions(source) == partitions
    assert isinstance(adapter.backlog_probe(source), probe)  # burst: its trace is missing
    assert adapter.uses_kafka is kafka


def test_a_burst_source_with_its_trace_has_a_clock_probe(tmp_path) -> None:
    (tmp_path / "t.csv").write_text("t,input_rate\n0,10\n")
    probe = adapter_for(BURST).backlog_probe(BurstSource(trace=str(tmp_path / "t.csv")))
    assert isinstance(probe, BurstBacklogProbe)


def _spec(source: dict, sink: dict, pipeline: list | None = None) -> StreamJobSpec:
    return StreamJobSpec.model_validate({
        "source": source, "sink": sink,
        "pipeline": pipeline or [{"type": "filter", "name": "f", "condition": "true"}],
        "checkpoint": {"location": "/tmp/cp"},
    })  # fmt: skip


@pytest.mark.parametrize(
    ("source", "sink", "join_source", "expected"),
    [
        ({"type": "files", "path": "/in"}, {"type": "files", "path": "/out"}, None, False),
        ({"type": "kafka", "bootstrapServers": "b:9092", "topic": "t"},
         {"type": "files", "path": "/out"}, None, True),
        ({"type": "files", "path": "/in"},
         {"type": "kafka", "bootstrapServers": "b:9092", "topic": "o"}, None, True),
        ({"type": "files", "path": "/in"}, {"type": "files", "path": "/out"},
         {"type": "kafka", "bootstrapServers": "b:9092", "topic": "r"}, True),
    ],
    ids=["no-kafka", "kafka-source", "kafka-sink", "kafka-join-side"],
)
def test_uses_kafka_asks_every_input_and_the_sink(source, sink, join_source, expected) -> None:
    pipeline = []
    if join_source is not None:
        wm = {"column": "ts", "delay": "1 minute"}
        pipeline = [{"type": "join", "name": "j", "watermark": wm, "condition": "true",
                     "right": {"source": join_source, "watermark": wm}}]
    assert uses_kafka(_spec(source, sink, pipeline)) is expected


def test_the_connector_version_is_the_one_the_resolver_fetches() -> None:
    """The installed package cannot read hack/; the two pins must not drift."""
    text = (ROOT / "hack" / "tools" / "kafka" / "versions.env").read_text(encoding="utf-8")
    pins = dict(line.split("=", 1) for line in text.splitlines()
                if "=" in line and not line.lstrip().startswith("#"))
    assert pins["SPARK_KAFKA_VERSION"].strip() == SPARK_KAFKA_VERSION


def test_the_image_bakes_in_the_jars_the_resolver_fetches() -> None:
    """docker/spark-kafka-jars.txt (the image's connector; docker/ cannot read hack/) names the
    four jars of versions.env's versions, each pinned by a SHA-256."""
    text = (ROOT / "hack" / "tools" / "kafka" / "versions.env").read_text(encoding="utf-8")
    pins = {k: v.strip() for k, v in (line.split("=", 1) for line in text.splitlines()
                                      if "=" in line and not line.lstrip().startswith("#"))}
    listed = [line.split() for line in
              (ROOT / "docker" / "spark-kafka-jars.txt").read_text(encoding="utf-8").splitlines()
              if line.strip() and not line.startswith("#")]
    names = sorted(path.rsplit("/", 1)[1] for path, _ in listed)
    assert names == sorted([
        f"spark-sql-kafka-0-10_2.13-{pins['SPARK_KAFKA_VERSION']}.jar",
        f"spark-token-provider-kafka-0-10_2.13-{pins['SPARK_TOKEN_PROVIDER_VERSION']}.jar",
        f"kafka-clients-{pins['KAFKA_CLIENTS_VERSION']}.jar",
        f"commons-pool2-{pins['COMMONS_POOL2_VERSION']}.jar",
    ])
    assert all(len(sha) == 64 and int(sha, 16) >= 0 for _, sha in listed)


def test_every_operators_error_has_the_one_base_and_keeps_its_builtin() -> None:
    from operators.driver.actions import ActionConflict
    from operators.loadgen import LoadGenError
    from operators.query.cluster import ClusterError
    from operators.query.sinks import SinkError
    from operators.state import CheckpointError, RepartitionError

    value_errors = [errors.JobDefinitionError, errors.SourceError, errors.BurstSourceError,
                    errors.FileSourceError, errors.KafkaSourceError, SinkError, CheckpointError]
    runtime_errors = [errors.VerifierError, RepartitionError, ActionConflict, ClusterError,
                      LoadGenError]
    for cls in value_errors:
        assert issubclass(cls, OperatorsError) and issubclass(cls, ValueError), cls
    for cls in runtime_errors:
        assert issubclass(cls, OperatorsError) and issubclass(cls, RuntimeError), cls
    documented = errors.__doc__ or ""
    assert all(cls.__name__ in documented for cls in value_errors + runtime_errors)
    for cls in (errors.BurstSourceError, errors.FileSourceError, errors.KafkaSourceError):
        assert issubclass(cls, SourceError)


def test_the_arithmetic_imports_without_pyspark_or_pyarrow() -> None:
    code = (
        "import sys; sys.modules['pyspark'] = None; sys.modules['pyarrow'] = None\n"
        "import operators.sources, operators.sources.backlog, operators.sources.burst_clock\n"
        "import operators.offsets, operators.state.committed, operators.errors\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr



DRIVER_ONLY = ("pydantic", "structlog", "rich", "yaml", "contracts.streamjob", "contracts.sources",
               "operators.sources.registry", "operators.sources.kafka", "operators.sources.files")
"""What the driver imports and an executor's Python worker reading the burst source need not:
the manifest models, the logger and its pretty printer, the other adapters (1.3 of the
reader's 2.1 CPU-s of imports when the package's ``__init__`` pulled them in, docs/benchmark.md,
a Python worker's start)."""


def test_an_executors_python_worker_imports_the_reader_without_the_drivers_modules() -> None:
    # the worker unpickles the reader, which imports its module (and so the package's __init__)
    code = ("import sys, operators.sources.burst_datasource\n"
            f"print(sorted(m for m in sys.modules if m.startswith({DRIVER_ONLY!r})))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout

def _source_log(cp: Path, index: int, name: str, entries: list[tuple[str, int]]) -> None:
    """One file of Spark's file source log: a version line, then one JSON entry per file."""
    d = cp / "sources" / str(index)
    d.mkdir(parents=True, exist_ok=True)
    lines = ["v1"] + [f'{{"path":"{p}","timestamp":1,"batchId":{b}}}' for p, b in entries]
    (d / name).write_text("\n".join(lines))


def test_logged_files_are_the_newest_under_the_source_directory(tmp_path) -> None:
    from operators.sources.files import logged_files

    cp, src = tmp_path / "cp", tmp_path / "in dir"
    url = f"file://{str(src).replace(' ', '%20')}"  # Spark logs percent-encoded URIs
    _source_log(cp, 0, "9.compact", [(f"{url}/old-{i}.json", i) for i in range(10)])
    _source_log(cp, 0, "10", [(f"{url}/a.json", 10), (f"{url}/b.json", 10)])
    _source_log(cp, 0, "11", [(f"{url}/c.json", 11)])
    _source_log(cp, 1, "11", [(f"file://{tmp_path}/other/x.json", 11)])  # a join's other side
    (cp / "sources" / "0" / ".11.crc").write_text("not a log")

    newest = logged_files(str(cp), str(src), limit=4)
    assert [p.rsplit("/", 1)[1] for p in newest] == ["c.json", "a.json", "b.json", "old-9.json"]
    assert logged_files(str(cp), f"file://{src}/", limit=1)[0].endswith("/c.json")
    assert logged_files(str(cp), str(tmp_path / "other"))[0].endswith("/x.json")
    assert logged_files(str(cp), str(tmp_path / "in"), limit=4) == []  # a prefix is no parent
    assert logged_files(str(tmp_path / "fresh"), str(src)) == []  # a first start


class _Measured:
    """A source adapter whose records per cap unit are given (the seam :func:`capped` asks)."""

    def __init__(self, field: str | None, per_unit: float | None) -> None:
        self.cap_field, self.per_unit = field, per_unit

    def records_per_cap_unit(self, spark, source, checkpoint):
        return self.per_unit


@pytest.mark.parametrize(
    ("source", "per_unit", "records", "field", "expected"),
    [
        ("burst", 1.0, 1_500, "max_records_per_batch", 1_500),
        ("burst-own-lower", 1.0, 1_500, "max_records_per_batch", 900),
        ("files", 400.0, 1_500, "max_files_per_trigger", 3),  # whole files, rounded down
        ("files", 4_000.0, 1_500, "max_files_per_trigger", 1),  # never less than one file
        ("files-own-lower", 400.0, 40_000, "max_files_per_trigger", 2),
        ("files", None, 1_500, "max_files_per_trigger", None),  # unknown: not capped
        ("files", 400.0, None, "max_files_per_trigger", None),  # no cap asked
    ],
)
def test_capped_turns_records_into_the_unit_the_source_limits(
    monkeypatch, source, per_unit, records, field, expected
) -> None:
    import operators.sources.registry as sources

    models = {"burst": BURST, "burst-own-lower": BURST.model_copy(
        update={"max_records_per_batch": 900}), "files": FILES,
        "files-own-lower": FILES.model_copy(update={"max_files_per_trigger": 2})}
    model = models[source]
    monkeypatch.setattr(sources, "adapter_for", lambda s: _Measured(field, per_unit))
    assert getattr(sources.capped(None, model, records, "/cp"), field) == expected


def test_logged_files_match_a_relative_source_path(tmp_path, monkeypatch) -> None:
    from operators.sources.files import logged_files

    _source_log(tmp_path / "cp", 0, "0", [(f"file:{tmp_path}/in/a.json", 0)])  # file:/abs form
    monkeypatch.chdir(tmp_path)
    assert logged_files(str(tmp_path / "cp"), "in")[0].endswith("/in/a.json")
