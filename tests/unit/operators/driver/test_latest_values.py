"""What ``/status`` reads from the exporter: one typed, immutable snapshot of the latest
figures (``RunnerMetrics.latest``), each None until the event that sets it, and the runner's
status models built from it field by field."""

from __future__ import annotations

import json
import time

from contracts.manifests import load_job
from contracts.runner_api import BacklogStatus, Rates, StageReport
from operators.driver.exporter import LatestValues, RunnerMetrics
from operators.driver.runner import JobRunner
from operators.driver.stages import StageSample
from operators.sources.base import SourceBacklog
from tests.realcomponents import REPO


def _stage(kind: str, executor: str) -> StageSample:
    return StageSample(stage_id=1 if kind == "source" else 2, kind=kind, tasks=4, rows=0.0,
                       busy_seconds=1.5, wall_seconds=0.8, max_task_seconds=0.4,
                       median_task_seconds=0.3, tasks_by_executor={executor: 4})


def test_nothing_is_known_before_the_first_batch() -> None:
    assert RunnerMetrics("wc", ["counts"]).latest() == LatestValues()


def test_each_event_sets_its_figures_and_an_earlier_snapshot_stays_as_it_was() -> None:
    m = RunnerMetrics("wc", ["counts"])
    m.observe_progress({"batchId": 3, "numInputRows": 6000, "inputRowsPerSecond": 2000.0,
                        "processedRowsPerSecond": 3000.0, "durationMs": {"triggerExecution": 2000}},
                       SourceBacklog(records=500.0, age_seconds=1.5))
    after_batch = m.latest()
    assert (after_batch.batch, after_batch.backlog_records, after_batch.backlog_age_seconds) == (
        3, 500.0, 1.5)
    assert after_batch.processed_rows_per_second == 3000.0
    assert after_batch.stages_batch is None and after_batch.stages == ()

    m.observe_stages(3, [_stage("source", "1"), _stage("stateful", "2")])
    polled = m.latest()
    assert polled.stages_batch == 3
    assert [s.kind for s in polled.stages] == ["source", "stateful"]
    assert polled.stages[0].rows == 6000.0  # the listener's exact count, not stage I/O
    assert dict(polled.stateful_tasks_by_executor) == {"2": 4}

    m.observe_idle()
    idle = m.latest()
    assert (idle.arrival_rows_per_second, idle.backlog_records, idle.backlog_age_seconds) == (
        0.0, 0.0, 0.0)
    assert after_batch.backlog_records == 500.0 and polled.stages_batch == 3  # unchanged

    # the runner's /status, built from the snapshot field by field (no Spark runs)
    runner = JobRunner(load_job(REPO / "k8s" / "samples" / "wordcount.yaml"))
    runner.metrics = m
    status = runner.status()
    assert status.rates == Rates(arrival_rows_per_second=0.0, input_rows_per_second=2000.0,
                                 processed_rows_per_second=3000.0)
    assert status.backlog == BacklogStatus(records=0.0, age_seconds=0.0)
    assert status.stages is not None and status.stages[1] == StageReport.model_validate(
        idle.stages[1].to_dict())
    assert status.stateful_tasks_by_executor == {"2": 4}
    assert JobRunner(load_job(REPO / "k8s" / "samples" / "wordcount.yaml")).status().stages \
        is None  # never polled: absent, not empty


def test_arrival_is_known_while_a_long_batch_runs() -> None:
    """Two readings of the source during a batch that has not committed give the arrival rate,
    in one series with the progress events' readings."""
    m = RunnerMetrics("wc", ["counts"])
    m.observe_arrived(10_000.0, now=100.0)
    assert m.latest().arrival_rows_per_second is None  # one reading is no rate
    m.observe_arrived(60_000.0, now=105.0)
    assert m.latest().arrival_rows_per_second == 10_000.0
    m.observe_progress({"batchId": 0, "numInputRows": 20_000, "durationMs": {}},
                       SourceBacklog(records=0.0, arrived_total=110_000.0))
    assert m.latest().arrival_rows_per_second is not None
    assert m.latest().arrival_rows_per_second > 0


def test_the_backlog_age_grows_while_a_batch_hangs() -> None:
    """A batch that hangs (its executors lost with their node) posts no progress: the runner's
    watch asks the source for the backlog from the last committed batch's end, so the oldest
    record's age keeps growing instead of standing at the last commit's value."""
    runner = JobRunner(load_job(REPO / "k8s" / "samples" / "wordcount.yaml"))
    run_start = time.time() - 120.0
    end = json.dumps({"offset": 1000, "runStartUs": int(run_start * 1e6)})
    p = {"batchId": 7, "numInputRows": 1000, "durationMs": {},
         "sources": [{"endOffset": end, "latestOffset": end}]}
    runner.metrics.observe_progress(p, runner._backlog(p))
    runner._on_progress(p)
    committed = runner.metrics.latest().backlog_age_seconds
    assert committed is not None and committed > 0

    ages = []
    for _ in range(2):
        runner._arrivals_probed_at = 0.0  # the watch's interval, not waited here
        runner._probe_source((end,), started=time.time() - 60.0)
        ages.append(runner.metrics.latest().backlog_age_seconds)
        time.sleep(0.05)
    assert ages[0] is not None and ages[1] is not None
    assert committed <= ages[0] < ages[1]
    assert runner.status().backlog.age_seconds == ages[1]
    backlog = runner.metrics.latest().backlog_records
    assert backlog is not None and backlog > 0
