"""The exactly-once verifier: does the sink hold every committed input record's effect once?

    result = verify(spec, checkpoint_dir, sink_dir)   # after the query stopped
    assert result.ok, result.message

How: the checkpoint says which input the query committed (``commits/<N>`` names the last
committed batch, ``offsets/<N>`` holds each burst source's end offset and run start; read by
:func:`operators.state.committed.committed_progress`), and each source's adapter rereads exactly
that input (:meth:`operators.sources.base.SourceAdapter.committed_dataframe`). The burst
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
sink is read back with :func:`operators.query.sinks.read_kafka_output` (per batch id, the rows of
one complete write attempt). The topic must still hold the input (retention).

Needs a SparkSession (the active one unless given; with Kafka, one with the connector's jars)
and a ``files`` sink on a local path or a ``kafka`` sink; the inputs must be burst sources, or
one Kafka source.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from contracts.streamjob import AggregateOp, StreamJobSpec
from operators.errors import VerifierError
from operators.state.committed import CommittedProgress, committed_progress

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

    from contracts.streamjob import Source
    from operators.query.job import ReadSource

__all__ = ["CommittedProgress", "VerificationResult", "VerifierError", "committed_progress",
           "expected_output", "verify"]


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


def _batch_reader(spark: SparkSession, progress: CommittedProgress) -> ReadSource:
    from operators.sources.registry import adapter_for

    def read(source: Source, stream: str) -> DataFrame:
        return adapter_for(source).committed_dataframe(spark, source, stream, progress)

    return read


def expected_output(
    spark: SparkSession, spec: StreamJobSpec, progress: CommittedProgress
) -> DataFrame:
    """What the pipeline yields over exactly the committed input (batch mode)."""
    from operators.query.job import build_dataframe

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

    from operators.query.job import aggregation_alias
    from operators.query.sinks import read_files_output, read_kafka_output

    if spec.application is not None or spec.sink is None or spec.pipeline is None:
        raise VerifierError(
            "verify recomputes a pipeline job (source, pipeline, sink) from its committed input; "
            f"{spec.application.label if spec.application else 'this job'} is the user's own "
            "code, whose output only it can judge")
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
