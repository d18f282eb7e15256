"""Bad manifests fail before the query starts, naming the operator and the problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.realcomponents import require_module

require_module("pyspark")  # skips locally, fails in CI (tests/realcomponents.py)

from operators.query.job import JobDefinitionError, build_query, validate_job  # noqa: E402

pytestmark = pytest.mark.spark
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


def _with_pipeline(spec, *ops):
    return type(spec).model_validate({**spec.model_dump(by_alias=True), "pipeline": list(ops)})


WORDS = {"type": "project", "name": "words", "columns": ["key AS word", "event_time"]}

CASES = [
    # (id, pipeline ops, where, words in the message)
    (
        "bad-expression",
        [{"type": "filter", "name": "broken", "condition": "value >>>> 3"}],
        "operator 'broken' (filter)",
        ["syntax"],
    ),
    (
        "unknown-column",
        [WORDS, {"type": "project", "name": "oops", "columns": ["no_such_column"]}],
        "operator 'oops' (project)",
        ["no_such_column"],
    ),
    (
        "unknown-aggregate-key",
        [WORDS, {"type": "aggregate", "name": "per-x", "keys": ["x"]}],
        "operator 'per-x' (aggregate)",
        ["x"],
    ),
    (
        "custom-not-importable",
        [{"type": "custom", "name": "mine", "function": "no_such_module.sub:transform"}],
        "operator 'mine' (custom)",
        ["cannot import", "no_such_module"],
    ),
    (
        "custom-no-function",
        [{"type": "custom", "name": "mine", "function": "operators.udf_examples:nope"}],
        "operator 'mine' (custom)",
        ["no function", "nope"],
    ),
    (
        "custom-raises",
        [
            {
                "type": "custom",
                "name": "mine",
                "function": "operators.udf_examples:add_bucket",
                "options": {"buckets": "0"},
            }
        ],
        "operator 'mine' (custom)",
        ["buckets"],
    ),
    (
        "bad-parse-column",
        [{"type": "parse", "name": "p", "schema": "a INT", "column": "text"}],
        "operator 'p' (parse)",
        ["no column 'text'"],
    ),
    (
        "bad-window-duration",
        [
            WORDS,
            {
                "type": "aggregate",
                "name": "w",
                "keys": ["word"],
                "window": {"column": "event_time", "duration": "ten minutes"},
                "watermark": {"column": "event_time", "delay": "5 seconds"},
            },
        ],
        "operator 'w' (aggregate)",
        [],
    ),
]


@pytest.mark.parametrize(
    ("ops", "where", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_pipeline(spark, tmp_path, load_spec, ops, where, words):
    spec = _with_pipeline(load_spec("wordcount", tmp_path), *ops)
    with pytest.raises(JobDefinitionError) as err:
        build_query(spark, spec)
    assert err.value.where == where, str(err.value)
    for word in words:
        assert word.lower() in str(err.value).lower()
    assert not spark.streams.active, "nothing may start"
    assert not Path(spec.checkpoint.location).exists(), "the checkpoint must not be touched"


def test_hdfs_state_store_in_session(spark, tmp_path, load_spec):
    key = "spark.sql.streaming.stateStore.providerClass"
    before = spark.conf.get(key)
    spark.conf.set(key, HDFS)
    try:
        with pytest.raises(JobDefinitionError, match="RocksDB") as err:
            validate_job(spark, load_spec("wordcount", tmp_path))
        assert err.value.where == "state store"
    finally:
        spark.conf.set(key, before)


def test_hdfs_state_store_in_checkpoint(spark, tmp_path, load_spec):
    spec = load_spec("wordcount", tmp_path)
    offsets = Path(spec.checkpoint.location, "offsets")
    offsets.mkdir(parents=True)
    conf = {"spark.sql.streaming.stateStore.providerClass": HDFS}
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": conf}
    (offsets / "0").write_text(f'v1\n{json.dumps(meta)}\n{{"offset": 1}}')
    with pytest.raises(JobDefinitionError, match="HDFS") as err:
        validate_job(spark, spec)
    assert err.value.where == "state store"


def test_no_checkpoint_location(spark, tmp_path, load_spec):
    spec = load_spec("wordcount", tmp_path)
    broken = spec.model_construct(**{**dict(spec), "checkpoint": None})
    with pytest.raises(JobDefinitionError, match="no checkpoint location") as err:
        validate_job(spark, broken)
    assert err.value.where == "checkpoint"


@pytest.mark.parametrize(
    ("sample", "mode"),
    [("impressions-clicks", "complete"), ("wordcount", "append")],
    ids=["complete-without-aggregation", "append-without-watermark"],
)
def test_output_mode_the_pipeline_cannot_have(spark, tmp_path, load_spec, sample, mode):
    spec = load_spec(sample, tmp_path)
    spec = spec.model_copy(update={"sink": spec.sink.model_copy(update={"output_mode": mode})})
    with pytest.raises(JobDefinitionError, match="STREAMING_OUTPUT_MODE") as err:
        validate_job(spark, spec)
    assert err.value.where == f"output mode {mode!r}", str(err.value)


def test_load_trace_without_unit_rate(spark, tmp_path, load_spec):
    trace = tmp_path / "load.csv"
    trace.write_text("t,load\n0,1.5\n")
    spec = load_spec("wordcount", tmp_path)
    spec = spec.model_copy(update={"source": spec.source.model_copy(update={"trace": str(trace)})})
    with pytest.raises(JobDefinitionError, match=r"load_unit_rate|loadUnitRate") as err:
        validate_job(spark, spec)
    assert err.value.where == "source"
