"""Every PromQL query the controller runs, in one place.

The runner exports ``stream_autoscaler_*`` series labelled ``job`` (the StreamJob name) and, per
stage or stateful operator, ``operator`` (and ``kind``); Prometheus scrapes it with
``honor_labels: true`` so the runner's ``job`` label is kept and the target's ``up`` series carries
the same ``job``. ``$w`` is the evaluation window, ``$a`` the short span for the arrival rate.
"""

from __future__ import annotations

from dataclasses import dataclass

P = "stream_autoscaler_"

J = '{job="$job"}'
"""The selector of one job's series; ``$job``, ``$w`` (window) and ``$a`` (arrival span) are
filled in by :meth:`Window.render`."""


def _m(name: str) -> str:
    return P + name + J


SCALARS: dict[str, str] = {
    # driver liveness: Prometheus' own scrape health of the runner target
    "driver_up": "max(up" + J + ")",
    "arrival_rate": "avg_over_time(" + _m("arrival_rows_per_second") + "[$a])",
    "processed_rate": "sum(rate(" + _m("input_rows_total") + "[$w]))",
    "batches": "sum(increase(" + _m("batches_total") + "[$w]))",
    "batch_duration_seconds": "sum(rate(" + _m("batch_duration_seconds_sum") + "[$w])) / "
    "sum(rate(" + _m("batch_duration_seconds_count") + "[$w]))",
    "overhead_seconds": "sum(rate(" + _m("batch_overhead_seconds_sum") + "[$w])) / "
    "sum(rate(" + _m("batch_overhead_seconds_count") + "[$w]))",
    "trigger_interval_seconds": "max(" + _m("trigger_interval_seconds") + ")",
    "backlog_records": "max(" + _m("backlog_records") + ")",
    "backlog_age_seconds": "max(" + _m("backlog_age_seconds") + ")",
    "executors": "max(" + _m("executors") + ")",
    "cores_per_executor": "max(" + _m("executor_cores") + ")",
    "target_executors": "max(" + _m("target_executors") + ")",
    "source_partitions": "max(" + _m("source_partitions") + ")",
    "seconds_since_progress": "time() - max(" + _m("last_progress_timestamp_seconds") + ")",
    "failed_tasks": "sum(increase(" + _m("failed_tasks_total") + "[$w]))",
    "last_committed_batch": "max(" + _m("last_committed_batch") + ")",
    "memory_used_ratio": "max(" + _m("executor_memory_used_ratio") + ")",
}
"""Snapshot field -> query returning one series (or none)."""

_BY_STAGE = "sum by (operator, kind) "
PER_OPERATOR: dict[str, str] = {
    "rows": _BY_STAGE + "(increase(" + _m("stage_rows_total") + "[$w]))",
    "busy_seconds": _BY_STAGE + "(increase(" + _m("stage_busy_seconds_total") + "[$w]))",
    "wall_seconds": _BY_STAGE + "(increase(" + _m("stage_wall_seconds_total") + "[$w]))",
    "partitions": "max by (operator, kind) (" + _m("stage_tasks") + ")",
    "max_task_seconds": "max by (operator, kind) (" + _m("stage_max_task_seconds") + ")",
    "median_task_seconds": "max by (operator, kind) (" + _m("stage_median_task_seconds") + ")",
}
"""Stage field -> query returning one series per (operator, kind)."""

PER_STATE_OPERATOR: dict[str, str] = {
    "state_rows": "max by (operator) (" + _m("state_rows") + ")",
    "state_bytes": "max by (operator) (" + _m("state_bytes") + ")",
    "state_memory_bytes": "max by (operator) (" + _m("state_memory_bytes") + ")",
    "state_partitions": "max by (operator) (" + _m("state_operator_partitions") + ")",
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
