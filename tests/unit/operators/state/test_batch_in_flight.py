"""The batch in flight, from the checkpoint's offsets log to the engine's snapshot.

The offsets log as Spark writes it (``offsets/<N>``: version line, metadata with
``batchTimestampMs``, one offset line per source; ``commits/<N>`` once the batch ends), read by
:func:`operators.state.inflight.batch_in_flight`; the runner's exporter
(:class:`operators.driver.exporter.RunnerMetrics`) sets the ``batch_in_flight_*`` gauges from it;
the scrape adapter and the PromQL adapter turn them into ``batch_in_flight_seconds`` /
``batch_in_flight_rows``. No Spark runs (the real-Spark check is
tests/integration/spark_runtime/test_runtime_pieces.py::test_a_slow_batch_shows_in_flight).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contracts import metric_names as M
from controller.adapters.prometheus import PrometheusSource
from controller.adapters.promql import SCALARS, Window
from controller.adapters.scrape import ScrapeSource
from operators.driver.exporter import RunnerMetrics
from operators.offsets import planned_rows
from operators.state.inflight import batch_in_flight

T0 = 1_700_000_000.0


def log(root: Path, offsets: dict[int, list[Any]], commits: list[int],
        started_ms: int = int(T0 * 1000)) -> Path:
    cp = root / "cp"
    (cp / "offsets").mkdir(parents=True)
    (cp / "commits").mkdir()
    for n, sources in offsets.items():
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": started_ms + n,
                "conf": {"spark.sql.shuffle.partitions": "4"}}
        lines = ["v1", json.dumps(meta), *(json.dumps(s) for s in sources)]
        (cp / "offsets" / str(n)).write_text("\n".join(lines) + "\n")
    for n in commits:
        (cp / "commits" / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    return cp


def test_an_uncommitted_offsets_entry_is_the_batch_in_flight(tmp_path: Path) -> None:
    burst = {"offset": 1_000, "runStartUs": 1, "stream": "main"}
    cp = log(tmp_path, {4: [burst], 5: [{**burst, "offset": 251_000}]}, [3, 4])
    running = batch_in_flight(cp)
    assert running is not None
    assert (running.batch, running.rows) == (5, 250_000)
    assert running.started_at == pytest.approx(T0 + 0.005)


def test_every_planned_batch_committed_means_none_runs(tmp_path: Path) -> None:
    assert batch_in_flight(log(tmp_path, {4: [{"offset": 7}], 5: [{"offset": 9}]}, [4, 5])) is None
    assert batch_in_flight(tmp_path / "nowhere") is None  # no log yet: none, never an error


def test_the_first_batch_of_a_log_has_no_known_rows(tmp_path: Path) -> None:
    running = batch_in_flight(log(tmp_path, {0: [{"offset": 500}]}, []))
    assert running is not None and running.batch == 0 and running.rows is None


def test_the_batch_in_flight_carries_its_end_offsets(tmp_path: Path) -> None:
    """What the runner asks the source about while the batch runs (the arrival beyond it)."""
    first = {"offset": 42_000, "runStartUs": 1, "stream": "main"}
    running = batch_in_flight(log(tmp_path, {0: [first]}, []))
    assert running is not None and running.ends == (first,)


PLANNED = [
    ("burst records", [{"offset": 100, "runStartUs": 1}], [{"offset": 350, "runStartUs": 1}],
     250.0),
    ("kafka, per partition", [{"t": {"0": 10, "1": 5}}], [{"t": {"0": 30, "1": 5}}], 20.0),
    ("two sources summed", [{"t": {"0": 100}}, {"offset": 4}],
     [{"t": {"0": 150}}, {"offset": 10}], 56.0),
    ("a bare number: the rate source counts seconds, unknown", [100], [105], None),
    ("a kafka partition new in the batch: unknown", [{"t": {"0": 10}}],
     [{"t": {"0": 30, "1": 5}}], None),
    ("a file source's log index: unknown", [{"logOffset": 3}], [{"logOffset": 4}], None),
    ("sources changed between batches: unknown", [100], [150, 3], None),
]


@pytest.mark.parametrize(("name", "starts", "ends", "rows"), PLANNED, ids=[p[0] for p in PLANNED])
def test_planned_rows(name: str, starts: list[Any], ends: list[Any], rows: float | None) -> None:
    assert planned_rows(starts, ends) == rows


def _exposition(m: RunnerMetrics) -> str:
    from prometheus_client import generate_latest

    return generate_latest(m.registry).decode()


def test_the_exporter_reports_the_batch_until_the_listener_sees_it_commit() -> None:
    m = RunnerMetrics("wc", ["counts"])
    fetch_text = lambda _url: (200, _exposition(m))  # noqa: E731
    source = ScrapeSource(lambda _job: "http://runner/metrics", fetch=fetch_text)

    snap = source.snapshot("wc", Window(30), T0)
    assert snap.batch_in_flight_seconds is None  # start 0: none runs (known, and not an age)
    m.observe_in_flight(7, T0 - 95.0, 1.9e6)
    snap = source.snapshot("wc", Window(30), T0)
    assert (snap.batch_in_flight_seconds, snap.batch_in_flight_rows) == (95.0, 1.9e6)
    assert m.latest().batch_in_flight == 7

    m.observe_progress({"batchId": 7, "numInputRows": 1.9e6, "durationMs": {}}, None)
    text = _exposition(m)
    assert f'{M.BATCH_IN_FLIGHT_START.full}{{job="wc"}} 0.0' in text
    assert M.BATCH_IN_FLIGHT_ID.full + "{" not in text  # absent while none runs
    snap = source.snapshot("wc", Window(30), T0 + 1)
    assert snap.batch_in_flight_seconds is None and snap.batch_in_flight_rows is None

    m.observe_in_flight(7, T0 - 95.0, 1.9e6)  # read just before the commit: not in flight
    assert source.snapshot("wc", Window(30), T0 + 2).batch_in_flight_seconds is None
    m.observe_in_flight(8, T0 + 2.0, None)  # the next batch, rows unknown
    snap = source.snapshot("wc", Window(30), T0 + 5)
    assert (snap.batch_in_flight_seconds, snap.batch_in_flight_rows) == (3.0, None)


def test_the_promql_adapter_reads_the_same_fields() -> None:
    window = Window(30)
    by_query = {window.render(q, "wc"): f for f, q in SCALARS.items()}
    assert "> 0)" in SCALARS["batch_in_flight_seconds"]  # a start of 0 gives no series
    answers = {"batch_in_flight_seconds": "95", "batch_in_flight_rows": "1900000"}

    def query(q: str) -> list[dict[str, Any]]:
        f = by_query.get(q)
        return [{"metric": {}, "value": [T0, answers[f]]}] if f in answers else []

    snap = PrometheusSource(query=query).snapshot("wc", window, T0)
    assert (snap.batch_in_flight_seconds, snap.batch_in_flight_rows) == (95.0, 1.9e6)
