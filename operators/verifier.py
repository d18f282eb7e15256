"""The exactly-once verifier: does the sink hold every committed input record's effect once?

    result = verify(spec, checkpoint_dir, sink_dir)   # after the query stopped
    assert result.ok, result.message

How: the checkpoint says which input the query committed (``commits/<N>`` names the last
committed batch, ``offsets/<N>`` holds each burst source's end offset and run start). The burst
source is a pure function of the offset, so the verifier rereads exactly those records in batch
mode, runs the same pipeline over them (the job builder with a batch reader; watermarks are
no-ops in batch), and compares the result with what the files sink holds in batches ``0..N``:

* last operator an aggregation, ``update``: per key (window and grouping columns) the row of
  the highest batch id must equal the recomputed value;
* ``complete``: the highest batch holds every key once, with its value;
* ``append`` (windowed): every window that the watermark of batch N closed appears exactly once,
  with its value; windows still open must not appear;
* anything else (stateless, join, deduplicate): the rows, as a multiset, must be equal.

Kafka: a job whose only input is a Kafka source is replayed by reading the topic in batch mode
from the query's initial offsets (``sources/0/0``) to the end offsets of batch N; a ``kafka``
sink is read back with :func:`operators.sinks.read_kafka_output` (per batch id, the rows of one
complete write attempt). The topic must still hold the input (retention).

Needs a SparkSession (the active one unless given; with Kafka, one with the connector's jars)
and a ``files`` sink on a local path or a ``kafka`` sink; the inputs must be burst sources, or
one Kafka source.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from contracts.streamjob import AggregateOp, BurstSource, KafkaSource, StreamJobSpec

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

    from contracts.streamjob import Source


class VerifierError(RuntimeError):
    """The verifier cannot judge this job (wrong source or sink kind, unreadable checkpoint)."""


@dataclass(frozen=True)
class CommittedProgress:
    """What a checkpoint says the query committed."""

    last_committed_batch: int | None
    offsets: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Burst offsets of the last committed batch, by stream name ("main", "right:<join>")."""
    watermark_ms: int = 0
    """The event-time watermark batch N ran with (ms since the epoch)."""
    kafka_end: dict[str, dict[int, int]] | None = None
    """End offsets of the (single) Kafka source after batch N: ``{topic: {partition: off}}``."""
    kafka_start: dict[str, dict[int, int]] | None = None
    """Where the query's Kafka source started (``sources/0/0``)."""

    def records(self) -> dict[str, int]:
        """Records committed per stream."""
        out = {s: int(o["offset"]) for s, o in self.offsets.items()}
        if self.kafka_end is not None:
            start = self.kafka_start or {}
            out["main"] = sum(
                off - start.get(t, {}).get(p, 0)
                for t, parts in self.kafka_end.items()
                for p, off in parts.items()
            )
        return out


@dataclass
class VerificationResult:
    """The verdict, with counts and a few examples of each kind of difference."""

    ok: bool
    mode: str
    last_committed_batch: int | None
    records: dict[str, int]
    keys_checked: int
    missing: int = 0
    wrong: int = 0
    duplicates: int = 0
    unexpected: int = 0
    examples: dict[str, list[str]] = field(default_factory=dict)
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _batch_ids(directory: str) -> list[int]:
    if not os.path.isdir(directory):
        return []
    return sorted(int(n) for n in os.listdir(directory) if n.isdigit())


def committed_progress(checkpoint_dir: str) -> CommittedProgress:
    """Reads ``commits/`` and ``offsets/`` of a local checkpoint."""
    from operators.sources.kafka import parse_offsets

    path = checkpoint_dir.removeprefix("file://").removeprefix("file:")
    kafka_start = _initial_kafka_offsets(path)
    commits = _batch_ids(os.path.join(path, "commits"))
    if not commits:
        return CommittedProgress(None, kafka_start=kafka_start)
    last = commits[-1]
    offsets_file = os.path.join(path, "offsets", str(last))
    try:
        with open(offsets_file, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise VerifierError(
            f"checkpoint {checkpoint_dir}: batch {last} is committed but "
            f"{offsets_file} cannot be read ({e.strerror})"
        ) from None
    if len(lines) < 2 or lines[0] != "v1":
        raise VerifierError(f"{offsets_file}: not a Spark offsets log entry")
    meta = json.loads(lines[1])
    offsets = {}
    kafka: list[dict[str, dict[int, int]]] = []
    for line in lines[2:]:
        if not line.strip() or line.strip() == "-":
            continue
        value = json.loads(line)
        if isinstance(value, dict) and "runStartUs" in value:
            offsets[str(value.get("stream", "main"))] = value
        elif (k := parse_offsets(value)) is not None:
            kafka.append(k)
    if len(kafka) > 1:
        raise VerifierError(f"{offsets_file}: {len(kafka)} Kafka sources; one can be replayed")
    return CommittedProgress(
        last,
        offsets,
        int(meta.get("batchWatermarkMs", 0)),
        kafka_end=kafka[0] if kafka else None,
        kafka_start=kafka_start,
    )


def _initial_kafka_offsets(path: str) -> dict[str, dict[int, int]] | None:
    """The Kafka source's initial offsets (``sources/0/0``: a zero byte, ``v1``, the JSON)."""
    from operators.sources.kafka import parse_offsets

    try:
        with open(os.path.join(path, "sources", "0", "0"), "rb") as f:
            raw = f.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    brace = raw.find("{")
    return parse_offsets(raw[brace:]) if brace >= 0 else None


def _batch_reader(spark: SparkSession, progress: CommittedProgress):  # type: ignore[no-untyped-def]
    from operators.sources import register
    from operators.sources.burst import burst_options

    register(spark)

    def read(source: Source, stream: str) -> DataFrame:
        if isinstance(source, KafkaSource):
            return _kafka_replay(spark, source, stream, progress)
        if not isinstance(source, BurstSource):
            raise VerifierError(
                f"input {stream!r} is a {source.type} source; only burst sources can be replayed"
            )
        offset = progress.offsets.get(stream, {"offset": 0, "runStartUs": 0})
        opts = burst_options(source, stream=stream)
        opts.update(
            start_offset="0",
            end_offset=str(int(offset["offset"])),
            run_start_us=str(int(offset["runStartUs"])),
        )
        return spark.read.format("burst").options(**opts).load()

    return read


def _kafka_replay(
    spark: SparkSession, source: KafkaSource, stream: str, progress: CommittedProgress
) -> DataFrame:
    from operators.sources.kafka import COLUMNS, read_kafka

    if stream != "main":
        raise VerifierError(f"input {stream!r} is a kafka source; only the main one is replayed")
    start = progress.kafka_start
    if start is None:
        if progress.last_committed_batch is not None:
            raise VerifierError("checkpoint has committed batches but no sources/0/0 offsets")
        # Nothing committed: nothing expected (an empty read with the source's columns).
        empty = spark.read.format("kafka").options(_empty_read_options(source)).load()
        return empty.selectExpr(*COLUMNS).limit(0)
    end = progress.kafka_end if progress.kafka_end is not None else start
    return read_kafka(spark, source, streaming=False, starting=start, ending=end)


def _empty_read_options(source: KafkaSource) -> dict[str, str]:
    from operators.sources.kafka import kafka_options

    return {**kafka_options(source, streaming=False), "endingOffsets": "earliest"}


def expected_output(
    spark: SparkSession, spec: StreamJobSpec, progress: CommittedProgress
) -> DataFrame:
    """What the pipeline yields over exactly the committed input (batch mode)."""
    from operators.job import build_dataframe

    return build_dataframe(spark, spec, read=_batch_reader(spark, progress))


def verify(
    spec: StreamJobSpec,
    checkpoint_dir: str | None = None,
    sink_dir: str | None = None,
    *,
    spark: SparkSession | None = None,
    max_examples: int = 5,
) -> VerificationResult:
    """Compares the sink with the recomputed output of the committed input (see module doc).

    ``checkpoint_dir`` and ``sink_dir`` default to the manifest's locations.
    """
    from pyspark.sql import SparkSession

    from operators.job import aggregation_alias
    from operators.sinks import read_files_output, read_kafka_output

    spark = spark or SparkSession.getActiveSession()
    if spark is None:
        raise VerifierError("verify needs a SparkSession (none is active)")
    if spec.sink.type not in ("files", "kafka"):
        raise VerifierError(
            f"verify reads a files or kafka sink; this job's sink is {spec.sink.type}"
        )
    progress = committed_progress(checkpoint_dir or spec.checkpoint.location)
    expected_df = expected_output(spark, spec, progress)
    last = progress.last_committed_batch
    if spec.sink.type == "kafka":
        actual_df = read_kafka_output(
            spark, spec.sink, expected_df.schema, max_batch_id=-1 if last is None else last
        )
    else:
        actual_df = read_files_output(
            spark,
            spec.sink,
            expected_df.schema,
            max_batch_id=-1 if last is None else last,
            path=sink_dir,
        )
    final = spec.pipeline[-1]
    if isinstance(final, AggregateOp) and final.window and spec.sink.output_mode == "append":
        from pyspark.sql import functions as F

        # Only windows the watermark of the last committed batch closed have been emitted.
        closed = F.col("window_end") <= F.timestamp_millis(F.lit(progress.watermark_ms))
        expected_df = expected_df.filter(closed)
    expected = expected_df.toArrow().to_pandas()  # Arrow: fast, and timestamps stay UTC
    actual = actual_df.toArrow().to_pandas()

    base = {"last_committed_batch": last, "records": progress.records()}
    if isinstance(final, AggregateOp):
        values = [aggregation_alias(a) for a in final.aggregations]
        keys = [c for c in expected.columns if c not in values]
        mode = spec.sink.output_mode
        if mode == "append":
            if final.window is None:
                raise VerifierError("append mode needs a windowed aggregation")
            return _per_key(
                expected, actual, keys, values, "once-per-key", max_examples, base, latest=False
            )
        if mode == "complete":
            if len(actual):
                actual = actual[actual["batch_id"] == actual["batch_id"].max()]
            return _per_key(
                expected, actual, keys, values, "complete", max_examples, base, latest=False
            )
        return _per_key(
            expected, actual, keys, values, "latest-per-key", max_examples, base, latest=True
        )
    return _rows(expected, actual, max_examples, base)


def _fmt(row: Any) -> str:
    return ", ".join(f"{k}={v}" for k, v in dict(row).items())


def _per_key(
    expected: pd.DataFrame,
    actual: pd.DataFrame,
    keys: list[str],
    values: list[str],
    mode: str,
    max_examples: int,
    base: dict[str, Any],
    *,
    latest: bool,
) -> VerificationResult:
    import numpy as np

    examples: dict[str, list[str]] = {}
    if latest:
        per_batch = actual.groupby([*keys, "batch_id"], dropna=False).size()
        dup_rows = per_batch[per_batch > 1]
        final = actual.sort_values("batch_id", kind="stable").drop_duplicates(keys, keep="last")
    else:
        per_key = actual.groupby(keys, dropna=False).size()
        dup_rows = per_key[per_key > 1]
        final = actual.drop_duplicates(keys, keep="last")
    examples["duplicates"] = [str(k) for k in dup_rows.index[:max_examples]]
    merged = expected.merge(final, on=keys, how="outer", suffixes=("", "__actual"), indicator=True)
    missing = merged[merged["_merge"] == "left_only"]
    unexpected = merged[merged["_merge"] == "right_only"]
    both = merged[merged["_merge"] == "both"]
    bad = np.zeros(len(both), dtype=bool)
    for v in values:
        e, a = both[v], both[f"{v}__actual"]
        if np.issubdtype(e.dtype, np.floating) or np.issubdtype(a.dtype, np.floating):
            same = np.isclose(e.astype(float), a.astype(float), rtol=1e-9, equal_nan=True)
        else:
            same = (e == a).to_numpy()
        bad |= ~np.asarray(same, dtype=bool)
    wrong = both[bad]
    examples["missing"] = [_fmt(r[keys + values]) for _, r in missing.head(max_examples).iterrows()]
    examples["unexpected"] = [
        _fmt(r[keys + [f"{v}__actual" for v in values]])
        for _, r in unexpected.head(max_examples).iterrows()
    ]
    examples["wrong"] = [
        _fmt(
            {
                **{k: r[k] for k in keys},
                **{f"{v} expected": r[v] for v in values},
                **{f"{v} actual": r[f"{v}__actual"] for v in values},
            }
        )
        for _, r in wrong.head(max_examples).iterrows()
    ]
    return _result(
        mode,
        base,
        len(expected),
        len(missing),
        len(wrong),
        len(dup_rows),
        len(unexpected),
        examples,
    )


def _rows(
    expected: pd.DataFrame, actual: pd.DataFrame, max_examples: int, base: dict[str, Any]
) -> VerificationResult:
    import pandas as pd

    cols = list(expected.columns)
    exp = expected.value_counts(cols, dropna=False) if len(expected) else pd.Series(dtype=int)
    act = actual[cols].value_counts(cols, dropna=False) if len(actual) else pd.Series(dtype=int)
    both = pd.concat([exp.rename("expected"), act.rename("actual")], axis=1).fillna(0)
    missing = both[both["actual"] < both["expected"]]
    unexpected = both[(both["expected"] == 0) & (both["actual"] > 0)]
    dups = both[(both["expected"] > 0) & (both["actual"] > both["expected"])]
    examples = {
        name: [str(i) for i in frame.index[:max_examples]]
        for name, frame in (("missing", missing), ("unexpected", unexpected), ("duplicates", dups))
    }
    return _result(
        "rows",
        base,
        len(expected),
        int((missing["expected"] - missing["actual"]).sum()),
        0,
        int((dups["actual"] - dups["expected"]).sum()),
        len(unexpected),
        examples,
    )


def _result(
    mode: str,
    base: dict[str, Any],
    checked: int,
    missing: int,
    wrong: int,
    duplicates: int,
    unexpected: int,
    examples: dict[str, list[str]],
) -> VerificationResult:
    ok = not (missing or wrong or duplicates or unexpected)
    problems = [
        f"{n} {what}"
        for n, what in (
            (missing, "missing"),
            (wrong, "wrong"),
            (duplicates, "duplicated"),
            (unexpected, "unexpected"),
        )
        if n
    ]
    message = (
        f"exactly once: {checked} expected {'keys' if mode != 'rows' else 'rows'} over "
        f"{base['records']} committed records (batch {base['last_committed_batch']})"
        if ok
        else f"NOT exactly once ({mode}): {', '.join(problems)} of {checked}; "
        f"examples: { {k: v for k, v in examples.items() if v} }"
    )
    return VerificationResult(
        ok=ok,
        mode=mode,
        keys_checked=checked,
        missing=missing,
        wrong=wrong,
        duplicates=duplicates,
        unexpected=unexpected,
        examples={k: v for k, v in examples.items() if v},
        message=message,
        **base,
    )
