"""The batch's stages from the driver UI's REST API, polled off the query's thread.

The listener hands each committed batch id to :class:`StagePoller`, which reads the batch's SQL
executions (tagged ``batch = N``) -> their jobs -> their stages, giving per stage the task count
(= partitions), rows, busy task time, wall time, max and median task time (skew) and which
executor ran each task (:class:`StageSample`), and hands them to
:meth:`operators.driver.exporter.RunnerMetrics.observe_stages`.
"""

from __future__ import annotations

import contextlib
import queue
import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


class StageObserver(Protocol):
    """Where the poller's findings go (:class:`operators.driver.exporter.RunnerMetrics`): a
    Protocol, so this module needs nothing of the exporter and the two form no import cycle."""

    def observe_stages(self, batch: int, stages: list[StageSample]) -> None: ...

    def observe_memory(self, used_ratio: float) -> None: ...


@dataclass
class StageSample:
    """One stage of one batch, from the REST API."""

    stage_id: int
    kind: str
    tasks: int
    rows: float
    busy_seconds: float
    wall_seconds: float
    max_task_seconds: float
    median_task_seconds: float
    failed_tasks: int = 0
    tasks_by_executor: dict[str, int] = field(default_factory=dict)
    name: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def stage_sample(stage: dict[str, Any]) -> StageSample:
    """A StageSample from ``/stages/<id>?details=true`` (one attempt's JSON)."""
    tasks = [t for t in (stage.get("tasks") or {}).values() if t.get("status") == "SUCCESS"]
    runs = [float((t.get("taskMetrics") or {}).get("executorRunTime", 0)) / 1000 for t in tasks]
    placement: dict[str, int] = {}
    for t in tasks:
        placement[str(t.get("executorId"))] = placement.get(str(t.get("executorId")), 0) + 1
    shuffle_read = float(stage.get("shuffleReadRecords") or 0)
    rows = shuffle_read or float(stage.get("inputRecords") or 0) or float(
        stage.get("shuffleWriteRecords") or 0)
    return StageSample(
        stage_id=int(stage["stageId"]),
        kind="stateful" if shuffle_read > 0 or stage.get("shuffleReadBytes") else "source",
        tasks=int(stage.get("numTasks") or len(tasks)),
        rows=rows,
        busy_seconds=float(stage.get("executorRunTime") or 0) / 1000,
        wall_seconds=_wall(stage),
        max_task_seconds=max(runs, default=0.0),
        median_task_seconds=statistics.median(runs) if runs else 0.0,
        failed_tasks=int(stage.get("numFailedTasks") or 0),
        tasks_by_executor=placement,
    )


class StagePoller(threading.Thread):
    """Reads each committed batch's stages from the driver UI REST API, off the query thread."""

    def __init__(self, metrics: StageObserver, rest: Callable[[str], Any],
                 query_id: Callable[[], str | None]) -> None:
        super().__init__(name="stage-poller", daemon=True)
        self.metrics, self.rest, self.query_id = metrics, rest, query_id
        self.batches: queue.Queue[int | None] = queue.Queue(maxsize=64)
        self._pending: dict[int, list[int]] = {}
        self.errors = 0

    def submit(self, batch: int) -> None:
        """Called from the listener: cheap, never blocks (drops when the poller lags)."""
        with contextlib.suppress(queue.Full):
            self.batches.put_nowait(batch)

    def stop(self) -> None:
        self.batches.put(None)

    def run(self) -> None:
        while True:
            batch = self.batches.get()
            if batch is None:
                return
            try:
                self._poll(batch)
            except Exception:  # the UI may be busy or restarting: the next batch tries again
                self.errors += 1

    def _poll(self, batch: int) -> None:
        qid = self.query_id()
        # The UI keeps the last spark.sql.ui.retainedExecutions (the runner sets 60) executions.
        execs = self.rest("sql?details=false&offset=0&length=1000")
        tag = f"batch = {batch}"
        jobs: list[int] = []
        for e in execs:
            desc = e.get("description") or ""
            if desc.rstrip().endswith(tag) and (qid is None or qid in desc):
                jobs += list(e.get("successJobIds") or []) + list(e.get("failedJobIds") or [])
        stage_ids: list[int] = []
        for job in sorted(set(jobs)):
            stage_ids += self.rest(f"jobs/{job}").get("stageIds") or []
        samples = []
        for sid in sorted(set(stage_ids)):
            attempts = self.rest(f"stages/{sid}?details=true")
            done = [a for a in attempts if a.get("status") == "COMPLETE"]
            if done:
                samples.append(stage_sample(done[-1]))
        if samples:
            self.metrics.observe_stages(batch, samples)
        execs = [e for e in self.rest("executors") if e.get("id") != "driver"]
        available = sum(float(e.get("maxMemory") or 0) for e in execs)
        if available > 0:
            used = sum(float(e.get("memoryUsed") or 0) for e in execs)
            self.metrics.observe_memory(used / available)


def _wall(stage: dict[str, Any]) -> float:
    from datetime import datetime

    def ts(s: str | None) -> float | None:
        if not s:
            return None
        return datetime.strptime(s.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()

    a, b = ts(stage.get("firstTaskLaunchedTime")), ts(stage.get("completionTime"))
    return max(0.0, b - a) if a is not None and b is not None else 0.0
