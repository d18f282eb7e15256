"""A slow micro-batch shows up as the batch in flight while it runs (real Spark, local mode).

The listener reports a batch only when it ends; the runner reads the running one from the
checkpoint's offsets log (:func:`operators.state.inflight.batch_in_flight`). Here a rate source
feeds a ``foreachBatch`` that sleeps 4 s per batch: while it sleeps, the log must name the batch,
and its start (``batchTimestampMs``), and once it commits it is no longer in flight. Its rows are
unknown: the rate source's offset counts seconds, not records (found here: a batch of 500 rows
logged 5), so the reader does not trust bare numbers. About 35 s.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

SLEEP_SECONDS = 4.0


def test_a_slow_batch_shows_in_flight(tmp_path: Path, local_spark: Any) -> None:
    """On the package's shared session (``local_spark``): a session of its own would be the
    same one (``getOrCreate``), and stopping it broke every later test that verifies with it."""
    from operators.state.inflight import batch_in_flight

    spark = local_spark
    cp = tmp_path / "cp"

    def slow(df: Any, batch: int) -> None:
        df.count()
        time.sleep(SLEEP_SECONDS)

    query = (spark.readStream.format("rate").option("rowsPerSecond", 100).load()
             .writeStream.foreachBatch(slow).option("checkpointLocation", str(cp))
             .trigger(processingTime="1 second").start())  # fmt: skip
    try:
        seen = None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            running = batch_in_flight(cp)
            if running is not None and running.batch >= 2 and running.started_at is not None:
                age = time.time() - running.started_at
                if age >= 1.5:  # well inside the 4 s sleep
                    seen = (running, age, query.status)
                    break
            time.sleep(0.2)
        assert seen is not None, "no batch seen in flight"
        running, age, status = seen
        assert age < SLEEP_SECONDS + 3, age  # the start is the batch's, not an older one's
        assert status["isTriggerActive"], status
        assert running.rows is None, running  # the rate source's offsets are seconds
        # it commits, and is then no longer the batch in flight
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            progress = query.lastProgress
            if progress is not None and progress["batchId"] >= running.batch:
                break
            time.sleep(0.2)
        assert query.lastProgress["batchId"] >= running.batch
        after = batch_in_flight(cp)
        assert after is None or after.batch > running.batch
    finally:
        query.stop()
