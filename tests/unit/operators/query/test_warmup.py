"""The warm-up's bookkeeping: which executors ran which warm-up, read from the driver's REST
API (a fake at our seam, ``rest``); the warm-up on real Spark is held by
tests/integration/spark_runtime/test_runner.py (the scale-out's new executors warmed)."""

from __future__ import annotations

import time
from typing import Any

from operators.query.warmup import (
    WarmResult,
    executors_of,
    in_group,
    of_query,
    python_warmup,
    settle_for,
    warm,
)

JOBS = [
    {"jobId": 1, "jobGroup": "g-1", "description": None, "stageIds": [3],
     "status": "SUCCEEDED"},
    {"jobId": 2, "jobGroup": None, "description": "q-state-1\nid = x\nrunId = y\nbatch = 0",
     "stageIds": [4, 5], "status": "SUCCEEDED"},
    {"jobId": 3, "jobGroup": None, "description": "the job's own batch = 7", "stageIds": [6],
     "status": "RUNNING"},
]
TASKS = {3: ["2", "3"], 4: ["3"], 5: ["4", "4"], 6: ["1"]}


def fake_rest(path: str) -> Any:
    if path == "jobs":
        return JOBS
    parts = path.split("/")
    stage = int(parts[1].split("?")[0])
    if len(parts) == 2:
        return [{"attemptId": 0}]
    return [{"executorId": e} for e in TASKS[stage]]


def test_the_executors_of_a_job_group_and_of_a_named_query() -> None:
    assert executors_of(fake_rest, in_group("g-1")) == {"2", "3"}
    assert executors_of(fake_rest, of_query("q-state-1")) == {"3", "4"}
    assert executors_of(fake_rest, in_group("nope"), settle_seconds=0.0) == set()


def test_a_job_still_running_in_the_rest_view_is_waited_for() -> None:
    views = iter([[{**JOBS[0], "status": "RUNNING", "stageIds": []}], JOBS])

    def lagging(path: str) -> Any:
        return next(views) if path == "jobs" else fake_rest(path)

    assert executors_of(lagging, in_group("g-1"), settle_seconds=5.0) == {"2", "3"}
    # one that never ends there is read as it stands once the wait is over
    assert executors_of(fake_rest, of_query("the job's own"), settle_seconds=0.0) == {"1"}


def test_an_executor_is_warm_only_once_it_ran_both_warm_ups() -> None:
    r = WarmResult(asked=["3", "4"], python={"2", "3"}, stateful={"3", "4"}, rounds=3,
                   seconds=12.345)
    assert r.warmed == ["3"] and r.cold == ["4"]
    assert r.to_wire() == {"warmed": ["3"], "rounds": 3, "seconds": 12.35, "cold": ["4"]}
    failed = WarmResult(asked=["5"], error="boom")
    assert failed.to_wire() == {"warmed": [], "rounds": 0, "seconds": 0.0, "cold": ["5"],
                                "error": "boom"}


def test_the_python_task_imports_what_it_can_and_counts_its_rows() -> None:
    import pyarrow as pa

    task = python_warmup(("json", "no_such_module_for_the_warmup"), min_seconds=0.05)
    start = time.monotonic()
    batches = [pa.RecordBatch.from_pydict({"id": list(range(n))}) for n in (4, 3)]
    out = list(task(iter(batches)))
    assert [b.to_pydict() for b in out] == [{"rows": [7]}]
    assert time.monotonic() - start >= 0.05


def test_a_warm_up_past_its_deadline_touches_nothing_and_says_so() -> None:
    # a restart's budget spent waiting: no Spark call (spark=None would raise), all cold
    r = warm(None, fake_rest, ["3", "4"], 1, deadline=time.monotonic() - 1.0)  # type: ignore[arg-type]
    assert r.cold == ["3", "4"] and r.rounds == 0 and r.error == "no time left before the restart"
    assert settle_for(time.monotonic() - 1.0) == 0.0
    assert 0.0 < settle_for(time.monotonic() + 2.0) <= 2.0
