"""operators.query.sinks.forget_unfinished_batch: a batch left in flight may be skipped only
where no reader sees what it wrote. The files sink's branch and the refusals need no Spark
(Spark's own file sink, whose log is read through the JVM, is covered in the Spark tier:
tests/integration/spark_runtime/test_runner.py)."""

from __future__ import annotations

from pathlib import Path

from contracts.streamjob import Sink
from operators.query.sinks import committed_batch_dirs, forget_unfinished_batch


def _batch(root: Path, n: int) -> Path:
    d = root / f"batch_id={n}"
    d.mkdir(parents=True)
    (d / "part-0000.parquet").write_bytes(b"rows")
    (d / "_SUCCESS").write_bytes(b"")
    return d


def test_the_files_sink_forgets_the_unfinished_batch_and_keeps_the_others(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _batch(out, 2)
    _batch(out, 3)  # the attempt the stop cut short (or finished before the commit)
    sink = Sink(type="files", path=str(out))
    assert forget_unfinished_batch(None, sink, None, 3)  # type: ignore[arg-type]
    assert list(committed_batch_dirs(str(out))) == [2]
    assert (out / "batch_id=2" / "part-0000.parquet").read_bytes() == b"rows"
    # nothing written yet: nothing to forget, and the batch may be skipped all the same
    assert forget_unfinished_batch(None, sink, None, 4)  # type: ignore[arg-type]


def test_sinks_that_cannot_take_a_batch_back_refuse() -> None:
    for sink in (Sink(type="kafka", bootstrap_servers="127.0.0.1:9092", topic="t"),
                 Sink(type="memory"), Sink(type="console")):
        assert not forget_unfinished_batch(None, sink, None, 3), sink  # type: ignore[arg-type]
    assert not forget_unfinished_batch(None, None, None, 3)  # a user's foreachBatch  # type: ignore[arg-type]
    assert forget_unfinished_batch(None, Sink(type="noop"), None, 3)  # type: ignore[arg-type]
