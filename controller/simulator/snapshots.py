"""The snapshot the engine sees, built from the simulated job the way the metrics adapter would.

Windowed over the last ``window`` seconds of batches (by their end time), with ``observed_at``
the last batch end; the batch running at ``now`` is reported as the runner reports it (its age
and its records, the planned offsets), never its end, which only the simulator knows. Offsets
(backlog, its age, committed batch, the running batch's records) are exact, as Spark's offsets
are; rates, rows and busy times carry the model's optional, seeded measurement noise.
"""

from __future__ import annotations

import random
import statistics

from controller.core.snapshot import MetricsSnapshot, StageMetrics
from controller.simulator.job import Batch, SimulatedJob

EPOCH = 1_700_000_000.0
"""Simulated t=0 as Unix time, so the engine sees realistic clocks."""


class Noise:
    """Multiplicative Gaussian measurement noise, seeded."""

    def __init__(self, sigma: float, seed: int) -> None:
        self.sigma = sigma
        self.rng = random.Random(seed)

    def __call__(self, v: float) -> float:
        if self.sigma <= 0:
            return v
        return v * max(0.0, 1.0 + self.rng.gauss(0.0, self.sigma))


def window_batches(job: SimulatedJob, now: float, window: float) -> list[Batch]:
    """Batches that ended in ``(now - window, now]``."""
    out: list[Batch] = []
    for b in reversed(job.batches):
        if b.end <= now - window:
            break
        if b.end <= now:
            out.append(b)
    out.reverse()
    return out


def cpu_seconds(job: SimulatedJob, t0: float, t1: float) -> float:
    """Executor CPU time used in ``[t0, t1]`` (core-seconds), as a CPU metric (cAdvisor,
    metrics-server) would see it: each stage runs after the batch's driver overhead, its slots
    busy at ``busy / wall`` cores while it runs."""
    total = 0.0
    batches = [*job.batches[-200:], *([job.batch] if job.batch is not None else [])]
    for b in batches:
        if b.end <= t0 or b.start >= t1:
            continue
        at = b.start + b.overhead
        for r in b.stages:
            lo, hi = max(at, t0), min(at + r.wall, t1)
            if hi > lo and r.wall > 0:
                total += (hi - lo) * r.busy / r.wall
            at += r.wall
    return total


ARRIVAL_SPAN_SECONDS = 10.0
"""The arrival rate is the source's latest-offset growth over this span, not the whole window
(as the metrics adapter's short PromQL rate): a step in the load shows at the next evaluation
instead of being averaged in over the window."""


def _arrival_rate(job: SimulatedJob, now: float, window: float) -> float:
    """Records/s arrived over the last ARRIVAL_SPAN_SECONDS (or the run so far if shorter)."""
    span = min(window, ARRIVAL_SPAN_SECONDS, max(now, 1.0))
    return max(0.0, job.arrived(now) - job.arrived(max(0.0, now - span))) / span


def build_snapshot(
    job: SimulatedJob, now: float, window: float, noise: Noise, job_name: str = "sim"
) -> MetricsSnapshot:
    """The MetricsSnapshot of ``job`` at simulated time ``now`` over ``window`` seconds."""
    m = job.model
    batches = window_batches(job, now, window)
    last_end = job.batches[-1].end if job.batches else None
    common = {
        "job": job_name,
        "window_seconds": window,
        "trigger_interval_seconds": m.trigger_seconds,
        "executors": job.live(now),
        "cores_per_executor": m.cores_per_executor,
        "target_executors": job.requested,
        "source_partitions": m.source_partitions,
        "driver_up": job.driver_up,
        "backlog_records": job.backlog,
        "backlog_age_seconds": job.lag(now),
        "arrival_rate": noise(_arrival_rate(job, now, window)),
        "last_committed_batch": job.batches[-1].id if job.batches else -1,
        "last_restart_seconds": job.last_restart_seconds,
        "admission_cap_records": job.admission,
    }
    running = job.batch
    if running is not None and running.start <= now:  # as the runner reports it: start, rows
        common["batch_in_flight_seconds"] = now - running.start
        common["batch_in_flight_rows"] = running.records  # offsets: exact
    if last_end is None:
        return MetricsSnapshot(batches=0, **common)
    common["seconds_since_progress"] = max(0.0, now - job.last_commit)
    if not batches:
        return MetricsSnapshot(observed_at=EPOCH + last_end, batches=0, **common)
    stages = []
    for i, spec in enumerate(m.stages):
        runs = [b.stages[i] for b in batches]
        row: dict[str, object] = {
            "name": spec.name,
            "kind": spec.kind,
            "partitions": runs[-1].partitions,
            "rows": noise(sum(b.records for b in batches)),
            "busy_seconds": noise(sum(r.busy for r in runs)),
            "wall_seconds": sum(r.wall for r in runs),
            # within the newest batch, as the exporter reports them (its stage gauges): across
            # batches, one catch-up batch's long tasks would read as skew
            "max_task_seconds": runs[-1].task,
            "median_task_seconds": runs[-1].task,
        }
        if spec.kind == "stateful":
            row["state_rows"] = job.state_keys
            row["state_bytes"] = job.state_bytes
            row["state_memory_bytes"] = job.state_bytes
        stages.append(StageMetrics.model_validate(row))
    return MetricsSnapshot(
        observed_at=EPOCH + last_end,
        batches=len(batches),
        batch_duration_seconds=statistics.fmean(b.end - b.start for b in batches),
        overhead_seconds=statistics.fmean(b.overhead for b in batches),
        processed_rate=noise(sum(b.records for b in batches) / window),
        stages=tuple(stages),
        **common,
    )
