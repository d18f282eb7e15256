"""The closed loop on Kafka: the load generator bursts into a topic, the backlog grows, the
controller (LocalController: Prometheus -> decide -> the runner's control endpoint) scales out,
the backlog drains and the Kafka sink holds every record exactly once. And a topic with fewer
partitions than the load needs is diagnosed as source partition-bound, not scaled.

The pipeline burns CPU per record (a SHA-512 over a repeated key), so one executor falls behind
at a rate the load generator reaches without starving the job of the machine's two cores.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.demo import RunnerActuator
from contracts.manifests import load_job
from contracts.ports import free_port
from controller.adapters.prometheus import PrometheusSource
from controller.core import Action, BottleneckKind, Decision, Reason
from controller.local.loop import Evaluation, LocalController, PolicyFile
from controller.local.processes import RunnerProcess
from controller.local.prometheus_server import PrometheusServer
from operators.loadgen import LoadGenerator, burst_spec
from operators.verifier import committed_progress, verify
from tests.integration.kafka.conftest import topic_name, trace_file, write_kafka_job
from tests.realcomponents import unavailable

pytestmark = pytest.mark.closed_loop

HEAVY = "crc32(sha2(repeat(key, 40), 512)) AS h"
"""~30-60 us of CPU per record: one 1-core executor carries ~10-20k records/s here."""
POLICY = {
    "apiVersion": "stream-autoscaler.io/v1alpha1",
    "kind": "ScalingPolicy",
    "metadata": {"name": "kafka-tier"},
    "spec": {
        "mode": "enforce",
        "executors": {"min": 1, "max": 2},
        "lag": {"sloSeconds": 15, "catchUpSeconds": 20},
        "timing": {"evaluationIntervalSeconds": 5, "windowSeconds": 20, "cooldownSeconds": 20,
                   "scaleDownStabilizationSeconds": 600},
    },
}  # fmt: skip
"""Short windows so the tier stays short; no scale-in during the test (600 s)."""


def heavy_job(tmp: Path, **kw: Any) -> Path:
    path = write_kafka_job(tmp, stateful=False, **kw)
    doc = yaml.safe_load(path.read_text())
    doc["spec"]["pipeline"][-1]["columns"].append(HEAVY)
    path.write_text(yaml.safe_dump(doc))
    return path


class Loop:
    """Prometheus scraping one runner, and the LocalController acting on it."""

    def __init__(self, tmp: Path, runner: RunnerProcess, name: str) -> None:
        policy = tmp / "policy.yaml"
        policy.write_text(yaml.safe_dump(POLICY))
        self.prom = PrometheusServer(tmp / "prometheus",
                                     {name: f"127.0.0.1:{runner.metrics_port}"}).start()
        self.evaluations: list[Evaluation] = []
        self.actuator = RunnerActuator(runner, t0=time.time())
        self.controller = LocalController(
            name,
            PolicyFile(policy),
            PrometheusSource(self.prom.url),
            self.actuator,
            on_evaluation=self.evaluations.append,
        )

    def stop(self) -> None:
        self.controller.stop()
        self.prom.stop()


@pytest.fixture
def prometheus_available() -> None:
    from controller.local.prometheus_server import PrometheusNotFound, find_binary

    try:
        find_binary()
    except PrometheusNotFound as e:
        unavailable(f"no Prometheus: {e} (make setup)")


@pytest.fixture
def runner_factory(cluster: Any, tmp_path: Path) -> Iterator[Any]:
    started: list[RunnerProcess] = []

    def make(job: Path, workdir: Path) -> RunnerProcess:
        workdir.mkdir(parents=True, exist_ok=True)
        token = workdir / "token"
        token.write_text(secrets.token_urlsafe(16))
        r = RunnerProcess(job, cluster.master_url, workdir, free_port(), free_port(),
                          executors=1, max_executors=2, token_file=token)  # fmt: skip
        started.append(r)
        return r

    yield make
    for r in started:
        r.kill()


def log_tail(r: RunnerProcess) -> str:
    return (r.workdir / "runner.log").read_text(errors="replace")[-3000:]


def summary(evs: list[Evaluation]) -> str:
    return "\n".join(f"{ev.time:.0f} {ev.decision.reason.value}: {ev.decision.message}"
                     for ev in evs[-12:])  # fmt: skip


def test_burst_into_kafka_scales_out_drains_and_stays_exactly_once(
    broker: str, spark: Any, runner_factory: Any, prometheus_available: None, tmp_path: Path
) -> None:
    src, out = topic_name("burst-in"), topic_name("burst-out")
    name = "kafka-burst"
    # quiet 1,000/s for 25 s (the loop learns the per-record cost), a 30,000/s burst for 15 s,
    # then 1,000/s: ~490k records in 75 s
    trace = trace_file(tmp_path, [(0, 1_000), (25, 30_000), (40, 1_000)])
    gen = LoadGenerator(broker, src, burst_spec(trace, keys=500, seed=21), partitions=4)
    gen.create_topic()
    job_file = heavy_job(tmp_path / "job", name=name, bootstrap=broker, topic=src,
                         out_topic=out, max_offsets=60_000)  # fmt: skip
    spec = load_job(job_file).spec
    runner = runner_factory(job_file, tmp_path / "runner")
    runner.start()
    loop = Loop(tmp_path, runner, name)
    stats: dict[str, Any] = {}
    load = threading.Thread(target=lambda: stats.update(s=gen.run(duration=75)), daemon=True)
    try:
        loop.controller.start()
        t0 = time.time()
        load.start()
        scaled: Decision | None = None
        deadline = time.monotonic() + 300
        drained_at = None
        while time.monotonic() < deadline:
            time.sleep(2)
            acted = [ev for ev in loop.evaluations if ev.acted]
            if scaled is None and acted:
                scaled = acted[0].decision
            done = "s" in stats
            if done and committed_progress(spec.checkpoint.location).records().get(
                "main"
            ) == stats["s"].records:
                drained_at = time.time()
                break
        assert "s" in stats, "load generator did not finish"
        assert scaled is not None, f"no action taken:\n{summary(loop.evaluations)}"
        assert drained_at is not None, f"backlog not drained:\n{summary(loop.evaluations)}"
        assert scaled.action in (Action.SCALE, Action.REPARTITION), scaled.message
        assert scaled.reason in (Reason.SCALE_OUT, Reason.REPARTITION_OUT), scaled.message
        assert runner.client.status().executors.live == 2
        backlogs = [ev.snapshot.backlog_records or 0 for ev in loop.evaluations]
        assert max(backlogs) > 50_000, backlogs  # the burst did pile up
    finally:
        gen.stop_event.set()
        loop.stop()
        load.join(30)
    assert runner.stop() == 0
    written = stats["s"].records
    result = verify(spec, spark=spark)
    assert result.ok, result.message
    assert result.records == {"main": written}
    figures = {
        "records": written,
        "burst_to_drained_seconds": round(drained_at - (t0 + 25), 1),
        "end_to_end_records_per_second": round(written / (drained_at - t0)),
        "scale_decision": scaled.message,
        "max_backlog_records": max(backlogs),
    }
    print("kafka burst figures:", json.dumps(figures))
    (tmp_path / "figures.json").write_text(json.dumps(figures, indent=2))


def test_too_few_topic_partitions_is_diagnosed_source_bound(
    broker: str, runner_factory: Any, prometheus_available: None, tmp_path: Path
) -> None:
    src, out = topic_name("narrow-in"), topic_name("narrow-out")
    name = "kafka-narrow"
    trace = trace_file(tmp_path, [(0, 25_000)])
    gen = LoadGenerator(broker, src, burst_spec(trace, keys=500, seed=3), partitions=1)
    gen.create_topic()
    job_file = heavy_job(tmp_path / "job", name=name, bootstrap=broker, topic=src,
                         out_topic=out, max_offsets=40_000)  # fmt: skip
    runner = runner_factory(job_file, tmp_path / "runner")
    runner.start()
    loop = Loop(tmp_path, runner, name)
    load = threading.Thread(target=lambda: gen.run(duration=70), daemon=True)
    load.start()
    try:
        bound: Evaluation | None = None
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and bound is None:
            time.sleep(5)
            ev = loop.controller.evaluate()
            if ev.decision.reason is Reason.SOURCE_PARTITION_BOUND:
                bound = ev
            assert not ev.acted, f"acted on a one-partition topic: {ev.decision.message}"
        assert bound is not None, f"never source-bound:\n{summary(loop.evaluations)}"
        d = bound.decision
        assert d.action is Action.HOLD and d.target_executors is None
        assert d.diagnosis.kind is BottleneckKind.SOURCE_PARTITIONS, d.diagnosis
        assert "minPartitions" in d.message, d.message
        assert bound.snapshot.source_partitions == 1
        print("source-bound decision:", d.message)
    finally:
        gen.stop_event.set()
        loop.stop()
        load.join(30)
        runner.kill()
