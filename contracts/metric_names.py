"""Every metric the runner exports, declared once: name, type, labels, help.

The runner's exporter registers these (``operators/driver/exporter.py``), the fake runner renders
them (``operators/testing/fake_runner_model.py``), the controller queries them
(``controller/adapters/promql.py``, ``controller/adapters/scrape.py``) and docs/runner.md documents
each one (``tests/unit/test_docs.py``). Usage::

    from contracts import metric_names as M

    M.INPUT_ROWS.full        # "stream_autoscaler_input_rows" (what a client library registers)
    M.INPUT_ROWS.total       # "stream_autoscaler_input_rows_total" (what Prometheus stores)
    M.BATCH_DURATION.sum     # "stream_autoscaler_batch_duration_seconds_sum"
    M.BATCH_DURATION.series  # ("..._sum", "..._count")

Every series carries ``job`` (the StreamJob's name); per-stage series add ``operator`` and
``kind``, per-stateful-operator series ``operator``. Names here are without :data:`PREFIX`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

PREFIX = "stream_autoscaler_"

MetricType = Literal["gauge", "counter", "summary"]

JOB = ("job",)
OPERATOR = ("job", "operator")
STAGE = ("job", "operator", "kind")
PARTITION = ("job", "topic", "partition")


@dataclass(frozen=True)
class Metric:
    """One exported metric family."""

    name: str
    """Without :data:`PREFIX` and without a type suffix (``_total``, ``_sum``, ``_count``)."""
    type: MetricType
    help: str
    labels: tuple[str, ...] = JOB

    @property
    def full(self) -> str:
        """The family name as registered (prometheus_client adds the suffixes)."""
        return PREFIX + self.name

    @property
    def total(self) -> str:
        """A counter's sample name."""
        assert self.type == "counter", self.name
        return self.full + "_total"

    @property
    def sum(self) -> str:
        assert self.type == "summary", self.name
        return self.full + "_sum"

    @property
    def count(self) -> str:
        assert self.type == "summary", self.name
        return self.full + "_count"

    @property
    def series(self) -> tuple[str, ...]:
        """The sample names Prometheus stores for this family."""
        if self.type == "counter":
            return (self.total,)
        if self.type == "summary":
            return (self.sum, self.count)
        return (self.full,)


def _gauge(name: str, help: str, labels: tuple[str, ...] = JOB) -> Metric:
    return Metric(name, "gauge", help, labels)


def _counter(name: str, help: str, labels: tuple[str, ...] = JOB) -> Metric:
    return Metric(name, "counter", help, labels)


def _summary(name: str, help: str, labels: tuple[str, ...] = JOB) -> Metric:
    return Metric(name, "summary", help, labels)


UP = _gauge("up", "1 while the runner is up.")
PHASE = _gauge("phase", "1 for the runner's current lifecycle phase.", ("job", "phase"))
ARRIVAL_RATE = _gauge("arrival_rows_per_second", "Records/s arriving at the source.")
INPUT_RATE = _gauge("input_rows_per_second", "Records/s read by the last batch (Spark).")
PROCESSED_RATE = _gauge("processed_rows_per_second", "Records/s the last batch processed.")
INPUT_ROWS = _counter("input_rows", "Records read by committed batches.")
BATCHES = _counter("batches", "Committed batches.")
LAST_BATCH_DURATION = _gauge("last_batch_duration_seconds", "Duration of the last batch.")
BATCH_DURATION = _summary("batch_duration_seconds", "Batch durations.")
LAST_BATCH_PART = _gauge("last_batch_part_seconds", "Last batch's durationMs parts.",
                         ("job", "part"))
BATCH_PART = _summary("batch_part_seconds", "Batch durationMs parts.", ("job", "part"))
LAST_BATCH_OVERHEAD = _gauge("last_batch_overhead_seconds", "Last batch's fixed driver time "
                             "(trigger execution minus addBatch).")
BATCH_OVERHEAD = _summary("batch_overhead_seconds", "Per-batch fixed driver time.")
TRIGGER_INTERVAL = _gauge("trigger_interval_seconds",
                          "Trigger interval (0 = as fast as possible).")
BACKLOG_RECORDS = _gauge("backlog_records", "Records arrived but not yet processed.")
BACKLOG_AGE = _gauge("backlog_age_seconds", "Age of the oldest unprocessed record.")
EXECUTORS = _gauge("executors", "Live executors.")
EXECUTOR_CORES = _gauge("executor_cores", "Cores (task slots) per executor.")
TARGET_EXECUTORS = _gauge("target_executors", "Executors last requested.")
TASK_SLOTS = _gauge("task_slots", "Live executors x cores per executor.")
SOURCE_PARTITIONS = _gauge("source_partitions", "Source partitions: the read-stage cap.")
STATE_PARTITIONS = _gauge("state_partitions", "State partitions (shuffle partitions).")
KAFKA_BEHIND = _gauge("kafka_offsets_behind_latest", "Kafka: offsets between the last "
                      "committed batch's end and the broker's latest, per partition.", PARTITION)
KAFKA_AGE = _gauge("kafka_backlog_age_seconds", "Kafka: age of the oldest unprocessed record "
                   "of the partition (its timestamp); 0 when none waits.", PARTITION)
LAST_COMMITTED_BATCH = _gauge("last_committed_batch", "Id of the last committed batch.")
LAST_PROGRESS = _gauge("last_progress_timestamp_seconds", "Unix time of the last batch.")
BATCH_IN_FLIGHT_START = _gauge("batch_in_flight_start_timestamp_seconds", "Unix time the "
                               "running micro-batch started (its offsets-log batchTimestampMs, "
                               "not before the query's start); 0 while none runs.")
BATCH_IN_FLIGHT_ID = _gauge("batch_in_flight_id", "Id of the running micro-batch; absent while "
                            "none runs.")
BATCH_IN_FLIGHT_ROWS = _gauge("batch_in_flight_input_rows", "Source records the running batch "
                              "reads (its planned end offsets less the previous batch's); "
                              "absent when unknown or none runs.")
ADMISSION_CAP = _gauge("admission_cap_records", "Records per micro-batch the admission cap "
                       "of the query's last start allows (the controller's: runner "
                       "--max-records-per-batch, a repartition's maxRecordsPerBatch); absent "
                       "when it set none.")
QUERY_FAILURES = _counter("query_failures", "Query terminations with an error.")
FAILED_TASKS = _counter("failed_tasks", "Failed tasks in the job's stages.")
EXECUTORS_LOST = _counter("executors_lost", "Executors lost with their node: pods Kubernetes "
                          "marked not Ready, killed in Spark and force-deleted by the runner so "
                          "that Spark replaces them.", ("job", "node"))
LAST_EXECUTOR_LOSS = _gauge("last_executor_loss_timestamp_seconds", "Unix time the runner last "
                            "removed executors lost with their node; absent before any.")
ACTIONS = _counter("actions", "Control actions by kind and outcome.",
                   ("job", "action", "outcome"))
LAST_RESTART_SECONDS = _gauge("last_restart_seconds", "How long the last restart (a "
                              "repartition or a re-spread of state) kept the job from "
                              "committing: from its stop to its first commit (s); absent "
                              "before any.")
LAST_ACTION_SECONDS = _gauge("last_action_seconds", "Duration of the last action by step.",
                             ("job", "action", "step"))
ACTION_STEP_SECONDS = _gauge("action_step_seconds", "Seconds each step of the last action "
                             "of a kind took alone (contracts.runner_api.Step; the runner's "
                             "own start: action=start).", ("job", "action", "step"))
STATE_ROWS = _gauge("state_rows", "Keys in state, per stateful operator.", OPERATOR)
STATE_BYTES = _gauge("state_bytes", "State size on disk (RocksDB SST files).", OPERATOR)
STATE_MEMORY = _gauge("state_memory_bytes", "State store memory in use.", OPERATOR)
STATE_OPERATOR_PARTITIONS = _gauge("state_operator_partitions",
                                   "State partitions per stateful operator.", OPERATOR)
STATE_ROWS_UPDATED = _counter("state_rows_updated", "State rows updated.", OPERATOR)
STAGE_ROWS = _counter("stage_rows", "Rows into each stage.", STAGE)
STAGE_BUSY = _counter("stage_busy_seconds", "Task run time summed over a stage's tasks.", STAGE)
STAGE_WALL = _counter("stage_wall_seconds", "Stage wall time (first launch to completion).",
                      STAGE)
STAGE_BATCHES = _counter("stage_batches", "Batches in which the stage ran.", STAGE)
STAGE_TASKS = _gauge("stage_tasks", "Tasks of the stage in the last batch (partitions).", STAGE)
STAGE_MAX_TASK = _gauge("stage_max_task_seconds", "Longest task, last batch.", STAGE)
STAGE_MEDIAN_TASK = _gauge("stage_median_task_seconds", "Median task, last batch.", STAGE)
EXECUTOR_TASKS = _counter("executor_tasks", "Tasks run per executor.", ("job", "executor"))
EXECUTOR_MEMORY_RATIO = _gauge("executor_memory_used_ratio", "Executors' storage memory in use "
                               "/ available (the UI's memoryUsed / maxMemory, summed).")

ALL: tuple[Metric, ...] = tuple(v for v in dict(globals()).values() if isinstance(v, Metric))
"""Every metric the runner exports, in declaration order."""
BY_NAME: dict[str, Metric] = {m.name: m for m in ALL}
