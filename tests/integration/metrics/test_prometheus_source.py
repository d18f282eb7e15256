"""The Prometheus adapter against a real Prometheus scraping the runner's real exporter.

The exporter (operators.driver.exporter.RunnerMetrics) is fed progress events shaped like Spark's,
so this tier needs Prometheus but no JVM; the runner tests cover the exporter against real Spark.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.history import ScalingHistory
from contracts.policy import ScalingPolicySpec
from contracts.ports import free_port
from controller.adapters.prometheus import PrometheusSource
from controller.adapters.promql import Window
from controller.core import Action, Reason, decide
from controller.local.prometheus_server import PrometheusNotFound, PrometheusServer
from tests.realcomponents import unavailable

JOB = "wordcount"


@pytest.fixture(scope="module")
def exporter() -> Iterator[int]:
    from operators.driver.exporter import RunnerMetrics
    from operators.driver.stages import StageSample
    from operators.sources.base import SourceBacklog

    m = RunnerMetrics(JOB, stateful=["counts"])
    port = free_port()
    server = m.serve(port)
    m.set_executors(live=2, target=2, cores=1)
    m.trigger.labels(JOB).set(1.0)
    m.source_partitions.labels(JOB).set(8)
    stop = threading.Event()

    def run() -> None:
        batch = 0
        while not stop.is_set():
            progress = {
                "batchId": batch,
                "numInputRows": 5_000,
                "inputRowsPerSecond": 5_000.0,
                "processedRowsPerSecond": 9_000.0,
                "durationMs": {"triggerExecution": 600, "addBatch": 450},
                "stateOperators": [
                    {
                        "numRowsTotal": 1_000,
                        "memoryUsedBytes": 2_000_000,
                        "numShufflePartitions": 4,
                        "customMetrics": {"rocksdbSstFileSize": 3_000_000},
                    }
                ],
            }
            m.observe_progress(progress, SourceBacklog(records=1_000, age_seconds=1.5))
            m.observe_stages(
                batch,
                [
                    StageSample(0, "source", 8, 5_000, 0.2, 0.1, 0.03, 0.02),
                    StageSample(1, "stateful", 4, 5_000, 0.3, 0.15, 0.08, 0.07),
                ],
            )
            batch += 1
            stop.wait(0.5)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    yield port
    stop.set()
    t.join(timeout=5)
    if isinstance(server, tuple):
        server[0].shutdown()
        server[0].server_close()  # the listening socket (else a ResourceWarning at collection)


@pytest.fixture(scope="module")
def prometheus(
    tmp_path_factory: pytest.TempPathFactory, exporter: int
) -> Iterator[PrometheusServer]:
    try:
        server = PrometheusServer(
            tmp_path_factory.mktemp("prom"), {JOB: f"127.0.0.1:{exporter}"}, scrape_interval=1.0
        )
        server.start()
    except PrometheusNotFound as e:
        unavailable(str(e))
    yield server
    server.stop()


def _wait_for(source: PrometheusSource, window: Window, cond: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = source.snapshot(JOB, window, time.time())
        if s.processed_rate and s.stages and s.batches:
            time.sleep(window.window_seconds + 2)  # let the window fill with samples
            return
        time.sleep(1)
    pytest.fail(f"no {cond} from Prometheus within {timeout} s: {s}")


def test_snapshot_from_real_prometheus(prometheus: PrometheusServer) -> None:
    source = PrometheusSource(prometheus.url)
    window = Window(window_seconds=10, arrival_seconds=5)
    _wait_for(source, window, "processed rate and stages")
    s = source.snapshot(JOB, window, time.time())
    assert s.driver_up is True
    assert (s.executors, s.cores_per_executor, s.source_partitions) == (2, 1, 8)
    assert s.trigger_interval_seconds == 1.0
    assert s.backlog_records == 1_000 and s.backlog_age_seconds == 1.5
    assert s.processed_rate == pytest.approx(10_000, rel=0.4)  # 5,000 rows every ~0.5 s
    assert s.batch_duration_seconds == pytest.approx(0.6, rel=0.05)
    assert s.overhead_seconds == pytest.approx(0.15, rel=0.05)
    assert s.seconds_since_progress is not None and s.seconds_since_progress < 5
    by_name = {st.name: st for st in s.stages}
    assert set(by_name) == {"source", "counts"}
    counts = by_name["counts"]
    assert counts.kind == "stateful" and counts.partitions == 4
    assert counts.state_bytes == 3_000_000 and counts.state_rows == 1_000
    assert counts.busy_seconds and counts.rows
    assert counts.busy_seconds / counts.rows == pytest.approx(0.3 / 5_000, rel=0.01)
    d = decide(s, ScalingPolicySpec(), ScalingHistory(), time.time())
    assert d.reason is not Reason.NO_METRICS, d.message


def test_unknown_job_has_no_data(prometheus: PrometheusServer) -> None:
    s = PrometheusSource(prometheus.url).snapshot("no-such-job", Window(10), time.time())
    assert s.observed_at is None and s.unavailable


def test_dead_prometheus_means_hold_and_the_reason_says_so(tmp_path: Path) -> None:
    port = free_port()  # nothing listens here
    s = PrometheusSource(f"http://127.0.0.1:{port}").snapshot(JOB, Window(10), time.time())
    assert s.observed_at is None and s.executors is None and s.arrival_rate is None
    d = decide(s, ScalingPolicySpec(), ScalingHistory(), time.time())
    assert (d.action, d.reason) == (Action.HOLD, Reason.NO_METRICS)
    assert f"127.0.0.1:{port}" in d.message
