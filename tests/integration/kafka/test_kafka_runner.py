"""A runner reading and writing Kafka, its driver killed mid-stream and restarted from the
checkpoint: it resumes at the committed offsets and the sink holds every record exactly once."""

from __future__ import annotations

import json
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from contracts.manifests import load_job
from contracts.ports import free_port
from controller.local.processes import RunnerProcess
from operators.loadgen import LoadGenerator, burst_spec
from operators.verifier import committed_progress, verify
from tests.integration.kafka.conftest import topic_name, trace_file, write_kafka_job

RATE = 4_000
"""records/s the generator writes while the driver runs, dies and comes back."""


def wait_for(what: str, check: Any, timeout: float, runner: RunnerProcess) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as e:  # the runner may be (re)starting
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.5)
    log = (runner.workdir / "runner.log").read_text(errors="replace")[-4000:]
    raise AssertionError(f"timed out waiting for {what}: {last}\n{log}")


def metric(runner: RunnerProcess, name: str) -> list[tuple[str, float]]:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{runner.metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return [(line.rsplit(" ", 1)[0], float(line.rsplit(" ", 1)[1]))
            for line in text.splitlines() if line.startswith(name)]  # fmt: skip


def test_killed_driver_resumes_at_the_committed_offsets(
    broker: str, cluster: Any, spark: Any, tmp_path: Path
) -> None:
    src, out = topic_name("rt-in"), topic_name("rt-out")
    source = burst_spec(trace_file(tmp_path, [(0, RATE)]), keys=300, seed=9)
    gen = LoadGenerator(broker, src, source, partitions=2)
    gen.create_topic()
    job_file = write_kafka_job(tmp_path / "job", name="kafka-restart", bootstrap=broker,
                               topic=src, out_topic=out, stateful=True, max_offsets=20_000)
    spec = load_job(job_file).spec  # fmt: skip
    token = tmp_path / "token"
    token.write_text(secrets.token_urlsafe(16))
    runner = RunnerProcess(job_file, cluster.master_url, tmp_path, free_port(), free_port(),
                           executors=1, max_executors=1, token_file=token)  # fmt: skip
    # never scaled: a ceiling of 1 spares the standalone master's surplus executor at each start
    stats: dict[str, Any] = {}
    load = threading.Thread(
        target=lambda: stats.update(s=gen.run(duration=40, max_records=RATE * 40)), daemon=True
    )
    load.start()
    try:
        runner.start()
        wait_for("3 committed batches", lambda: (
            runner.client.status().last_committed_batch or 0) >= 3, 180, runner)  # fmt: skip
        lag = metric(runner, "stream_autoscaler_kafka_offsets_behind_latest{")
        assert {label.split('partition="')[1][0] for label, _ in lag} == {"0", "1"}, lag
        parts = metric(runner, "stream_autoscaler_source_partitions{")
        assert parts and parts[0][1] == 2.0, parts

        runner.kill()  # SIGKILL: no stop at a batch boundary, maybe a batch in flight
        cp = spec.checkpoint.location
        at_kill = committed_progress(cp)
        assert at_kill.last_committed_batch is not None and at_kill.kafka_end
        planned = sorted(int(p.name) for p in (Path(cp) / "offsets").iterdir()
                         if p.name.isdigit())  # fmt: skip
        in_flight = planned[-1] if planned[-1] > at_kill.last_committed_batch else None
        in_flight_offsets = (Path(cp) / "offsets" / str(in_flight)).read_text() if in_flight else ""
        time.sleep(5)  # records keep arriving while the driver is down

        runner.start()
        st = wait_for("the restarted runner's first batch", lambda: (
            s := runner.client.status()).last_committed_batch is not None and
            s.last_committed_batch > at_kill.last_committed_batch and s, 180, runner)  # fmt: skip
        assert st.resumed_from_batch == at_kill.last_committed_batch
        if in_flight is not None:  # the planned batch is replayed at the same offsets
            assert (Path(cp) / "offsets" / str(in_flight)).read_text() == in_flight_offsets
        load.join(120)
        assert "s" in stats, "load generator did not finish"
        written = stats["s"].records
        wait_for("the backlog to drain", lambda: committed_progress(cp).records().get("main")
                 == written, 240, runner)  # fmt: skip
        assert runner.stop() == 0
    finally:
        gen.stop_event.set()
        runner.kill()
        load.join(30)

    result = verify(spec, spark=spark)
    assert result.ok, result.message
    assert result.records == {"main": written}
    summary = {"records": written, "killed_after_batch": at_kill.last_committed_batch,
               "in_flight": in_flight, "verdict": result.message}  # fmt: skip
    (tmp_path / "summary.json").write_text(json.dumps(summary))
