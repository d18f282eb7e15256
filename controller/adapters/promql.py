"""Every PromQL query the controller runs, in one place.

The runner exports the series of :mod:`contracts.metric_names`, labelled ``job`` (the StreamJob
name) and, per stage or stateful operator, ``operator`` (and ``kind``); Prometheus scrapes it with
``honor_labels: true`` so the runner's ``job`` label is kept and the target's ``up`` series carries
the same ``job``. ``$w`` is the evaluation window, ``$a`` the short span for the arrival rate.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts import metric_names as M

J = '{job="$job"}'
"""The selector of one job's series; ``$job``, ``$w`` (window) and ``$a`` (arrival span) are
filled in by :meth:`Window.render`."""


def _m(sample: str) -> str:
    return sample + J


SCALARS: dict[str, str] = {
    # driver liveness: Prometheus' own scrape health of the runner target
    "driver_up": "max(up" + J + ")",
    "arrival_rate": "avg_over_time(" + _m(M.ARRIVAL_RATE.full) + "[$a])",
    "processed_rate": "sum(rate(" + _m(M.INPUT_ROWS.total) + "[$w]))",
    "batches": "sum(increase(" + _m(M.BATCHES.total) + "[$w]))",
    "batch_duration_seconds": "sum(rate(" + _m(M.BATCH_DURATION.sum) + "[$w])) / "
    "sum(rate(" + _m(M.BATCH_DURATION.count) + "[$w]))",
    "overhead_seconds": "sum(rate(" + _m(M.BATCH_OVERHEAD.sum) + "[$w])) / "
    "sum(rate(" + _m(M.BATCH_OVERHEAD.count) + "[$w]))",
    "trigger_interval_seconds": "max(" + _m(M.TRIGGER_INTERVAL.full) + ")",
    "backlog_records": "max(" + _m(M.BACKLOG_RECORDS.full) + ")",
    "backlog_age_seconds": "max(" + _m(M.BACKLOG_AGE.full) + ")",
    "executors": "max(" + _m(M.EXECUTORS.full) + ")",
    "cores_per_executor": "max(" + _m(M.EXECUTOR_CORES.full) + ")",
    "target_executors": "max(" + _m(M.TARGET_EXECUTORS.full) + ")",
    "source_partitions": "max(" + _m(M.SOURCE_PARTITIONS.full) + ")",
    "seconds_since_progress": "time() - max(" + _m(M.LAST_PROGRESS.full) + ")",
    "failed_tasks": "sum(increase(" + _m(M.FAILED_TASKS.total) + "[$w]))",
    "executors_lost": "sum(increase(" + _m(M.EXECUTORS_LOST.total) + "[$w]))",
    "seconds_since_executor_loss": "time() - max(" + _m(M.LAST_EXECUTOR_LOSS.full) + ")",
    "last_committed_batch": "max(" + _m(M.LAST_COMMITTED_BATCH.full) + ")",
    "memory_used_ratio": "max(" + _m(M.EXECUTOR_MEMORY_RATIO.full) + ")",
    # the batch running now: its start is 0 while none runs, and ``> 0`` leaves no series then
    "batch_in_flight_seconds": "time() - max(" + _m(M.BATCH_IN_FLIGHT_START.full) + " > 0)",
    "batch_in_flight_rows": "max(" + _m(M.BATCH_IN_FLIGHT_ROWS.full) + ")",
    "last_restart_seconds": "max(" + _m(M.LAST_RESTART_SECONDS.full) + ")",
    "admission_cap_records": "max(" + _m(M.ADMISSION_CAP.full) + ")",
}
"""Snapshot field -> query returning one series (or none)."""

_BY_STAGE = "sum by (operator, kind) "
PER_OPERATOR: dict[str, str] = {
    "rows": _BY_STAGE + "(increase(" + _m(M.STAGE_ROWS.total) + "[$w]))",
    "busy_seconds": _BY_STAGE + "(increase(" + _m(M.STAGE_BUSY.total) + "[$w]))",
    "wall_seconds": _BY_STAGE + "(increase(" + _m(M.STAGE_WALL.total) + "[$w]))",
    "partitions": "max by (operator, kind) (" + _m(M.STAGE_TASKS.full) + ")",
    "max_task_seconds": "max by (operator, kind) (" + _m(M.STAGE_MAX_TASK.full) + ")",
    "median_task_seconds": "max by (operator, kind) (" + _m(M.STAGE_MEDIAN_TASK.full) + ")",
}
"""Stage field -> query returning one series per (operator, kind)."""

PER_STATE_OPERATOR: dict[str, str] = {
    "state_rows": "max by (operator) (" + _m(M.STATE_ROWS.full) + ")",
    "state_bytes": "max by (operator) (" + _m(M.STATE_BYTES.full) + ")",
    "state_memory_bytes": "max by (operator) (" + _m(M.STATE_MEMORY.full) + ")",
    "state_partitions": "max by (operator) (" + _m(M.STATE_OPERATOR_PARTITIONS.full) + ")",
}
"""Stateful-operator field -> query returning one series per operator."""


@dataclass(frozen=True)
class Window:
    """The ranges a snapshot's queries look over."""

    window_seconds: float
    arrival_seconds: float = 10.0
    """Short span for the arrival rate, so a step in the load shows at the next evaluation."""

    def render(self, template: str, job: str) -> str:
        span = min(self.arrival_seconds, self.window_seconds)
        return (
            template.replace("$job", job.replace('"', "").replace("\\", ""))
            .replace("$w", f"{max(1, round(self.window_seconds))}s")
            .replace("$a", f"{max(1, round(span))}s")
        )
