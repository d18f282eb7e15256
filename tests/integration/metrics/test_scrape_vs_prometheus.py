"""ScrapeSource against PrometheusSource: a real Prometheus and ScrapeSource read the same runner
exporter (operators.driver.exporter.RunnerMetrics fed Spark-shaped progress, no JVM) at the same
moment and must agree within the jitter of their different scrape instants.

Run: ``.venv/bin/pytest tests/integration/metrics/test_scrape_vs_prometheus.py`` (needs the
``prometheus`` binary; ``make`` installs it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from contracts.ports import free_port
from controller.adapters.prometheus import PrometheusSource
from controller.adapters.promql import Window
from controller.adapters.scrape import ScrapeSource
from controller.core import MetricsSnapshot
from controller.local.prometheus_server import PrometheusNotFound, PrometheusServer
from tests.realcomponents import unavailable

JOB = "clicks"
SCRAPE_SECONDS = 1.0
WINDOW = Window(window_seconds=10, arrival_seconds=5)


@pytest.fixture(scope="module")
def exporter_port() -> Iterator[int]:
    from operators.driver.exporter import RunnerMetrics
    from operators.driver.stages import StageSample
    from operators.sources.base import SourceBacklog

    m = RunnerMetrics(JOB, stateful=["counts"])
    port = free_port()
    server, _ = m.serve(port)
    m.set_executors(live=3, target=3, cores=1)
    m.trigger.labels(JOB).set(1.0)
    m.source_partitions.labels(JOB).set(6)
    stop = threading.Event()

    def run() -> None:
        batch = 0
        while not stop.is_set():
            progress = {
                "batchId": batch, "numInputRows": 4_000, "inputRowsPerSecond": 8_000.0,
                "durationMs": {"triggerExecution": 400, "addBatch": 300},
                "stateOperators": [{"numRowsTotal": 500, "memoryUsedBytes": 1e6,
                                    "numShufflePartitions": 3,
                                    "customMetrics": {"rocksdbSstFileSize": 2e6}}],
            }
            m.observe_progress(progress, SourceBacklog(records=200, age_seconds=0.5))
            m.observe_stages(batch, [
                StageSample(0, "source", 6, 4_000, 0.12, 0.05, 0.03, 0.02),
                StageSample(1, "stateful", 3, 4_000, 0.2, 0.08, 0.07, 0.06),
            ])
            batch += 1
            stop.wait(0.5)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    yield port
    stop.set()
    t.join(timeout=5)
    server.shutdown()
    server.server_close()  # the listening socket (else a ResourceWarning at collection)


@pytest.fixture(scope="module")
def prometheus(
    tmp_path_factory: pytest.TempPathFactory, exporter_port: int
) -> Iterator[PrometheusServer]:
    try:
        server = PrometheusServer(
            tmp_path_factory.mktemp("prom"), {JOB: f"127.0.0.1:{exporter_port}"},
            scrape_interval=SCRAPE_SECONDS,
        )
        server.start()
    except PrometheusNotFound as e:
        unavailable(str(e))
    yield server
    server.stop()


def _both(prometheus: PrometheusServer, port: int) -> tuple[MetricsSnapshot, MetricsSnapshot]:
    """Scrape every second until both windows are full, then read both at one instant."""
    prom = PrometheusSource(prometheus.url)
    scrape = ScrapeSource({JOB: f"http://127.0.0.1:{port}/metrics"}.get)
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and not prom.snapshot(JOB, WINDOW, time.time()).batches:
        time.sleep(1)
    for _ in range(int(WINDOW.window_seconds / SCRAPE_SECONDS) + 2):
        scrape.snapshot(JOB, WINDOW, time.time())
        time.sleep(SCRAPE_SECONDS)
    now = time.time()
    return prom.snapshot(JOB, WINDOW, now), scrape.snapshot(JOB, WINDOW, now)


def test_scrape_agrees_with_prometheus(prometheus: PrometheusServer, exporter_port: int) -> None:
    p, s = _both(prometheus, exporter_port)
    assert p.unavailable is None and s.unavailable is None, (p.unavailable, s.unavailable)
    exact = ("driver_up", "executors", "cores_per_executor", "target_executors",
             "source_partitions", "trigger_interval_seconds", "backlog_records",
             "backlog_age_seconds", "arrival_rate", "failed_tasks")
    assert {f: getattr(s, f) for f in exact} == {f: getattr(p, f) for f in exact}
    close = {"batch_duration_seconds": 0.02, "overhead_seconds": 0.02,
             "processed_rate": 0.25, "batches": 0.25}
    for f, rel in close.items():
        assert getattr(s, f) == pytest.approx(getattr(p, f), rel=rel), f
    assert s.seconds_since_progress == pytest.approx(p.seconds_since_progress, abs=1.5)
    assert s.last_committed_batch == pytest.approx(p.last_committed_batch, abs=3)
    ps, ss = ({st.name: st for st in x.stages} for x in (p, s))
    assert set(ps) == set(ss) == {"source", "counts"}
    for name in ps:
        a, b = ps[name], ss[name]
        assert (b.kind, b.partitions, b.state_bytes, b.state_rows) == (
            a.kind, a.partitions, a.state_bytes, a.state_rows)
        assert b.rows == pytest.approx(a.rows, rel=0.25)
        assert b.true_rate_per_slot() == pytest.approx(a.true_rate_per_slot(), rel=0.02)
