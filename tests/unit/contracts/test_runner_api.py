"""The runner's control API (contracts/runner_api.py): ``/status`` round-trips unchanged, unknown
reads as None, and the request models refuse bodies with the endpoint's 400 messages."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contracts.runner_api import (
    ActionAnswer,
    ActionKind,
    ActionRecord,
    ActionState,
    ConflictResponse,
    ExecutorsRequest,
    Phase,
    RepartitionRequest,
    RequestError,
    RunnerStatus,
    StartFirstBatch,
    StopRequest,
    parse_request,
)

ACTION = {
    "kind": "repartition", "params": {"partitions": 8}, "id": "ab12cd34-x", "state": "succeeded",
    "started_at": 1_700_000_000.5, "finished_at": 1_700_000_013.25,
    "timings": {"stop": 1.5, "repartition": 9.0, "first_commit": 12.0, "total": 12.75},
    "steps": {"stop_wait": 1.5, "snapshot": 0.5, "count_rows": 3.0, "rewrite": 4.0,
              "verify": 0.5, "query_start": 1.0, "first_commit": 2.0},
    "result": {"batch": 41, "rows_before": 3_000_000, "rows_after": 3_000_000,
               "repartition_batch": 42, "partitions": 8},
    "error": None, "duplicates": 1,
}
STATUS: dict[str, Any] = {
    # JobRunner.status() as the runner has always sent it (operators/driver/runner.py before the
    # contract): camelCase at the top, snake_case inside executors' list, rates, stages, actions
    "job": "wordcount", "phase": "Running", "queryId": "5b0c-query",
    "executors": {"live": 2, "target": 2, "cores": 1, "list": [
        {"id": "1", "host_port": "10.0.0.7:40411", "cores": 1, "active_tasks": 0,
         "total_tasks": 120, "memory_used": 52_428, "added_time": "2026-01-01T00:00:00.000GMT"},
    ]},
    "partitions": 8, "lastCommittedBatch": 57, "resumedFromBatch": 41,
    "rates": {"arrival_rows_per_second": 9_000.5, "input_rows_per_second": 8_800.0,
              "processed_rows_per_second": 12_000.25},
    "backlog": {"records": 1_200.0, "ageSeconds": 0.75},
    "batchDurationSeconds": 0.6,
    "stages": [{"stage_id": 7, "kind": "stateful", "tasks": 8, "rows": 5_000.0,
                "busy_seconds": 0.3, "wall_seconds": 0.15, "max_task_seconds": 0.08,
                "median_task_seconds": 0.07, "failed_tasks": 0,
                "tasks_by_executor": {"1": 8}, "name": "counts"}],
    "statefulTasksByExecutor": {"1": 8},
    "lastError": None,
    "maxRecordsPerBatch": 40000,
    "startSteps": {"session": 9.5, "executors": 4.25, "query_start": 1.5, "first_commit": 6.0},
    "startFirstBatch": {"batchId": 42, "rows": 108_721, "seconds": 18.25, "replayed": True},
    "lostExecutors": [{"executorId": "3", "pod": "wc-exec-3", "node": "worker2",
                       "notReadySince": 1_700_000_070.0, "removedAt": 1_700_000_081.5}],
    "warmExecutors": ["1"],
    "lastWarmup": {"warmed": ["1"], "rounds": 2, "seconds": 19.1},
    "action": None,
    "lastAction": ACTION,
    "recentActions": [ACTION],
}


def test_status_round_trips_to_the_same_json() -> None:
    st = RunnerStatus.model_validate(json.loads(json.dumps(STATUS)))
    assert st.phase is Phase.RUNNING and st.executors.live == 2
    assert st.backlog.age_seconds == 0.75 and st.rates.processed_rows_per_second == 12_000.25
    assert st.last_action is not None and st.last_action.kind is ActionKind.REPARTITION
    assert st.last_action.state is ActionState.SUCCEEDED
    assert st.find_action("ab12cd34-x") == st.last_action and st.find_action("nope") is None
    assert [(e.executor_id, e.node) for e in st.lost_executors] == [("3", "worker2")]
    assert st.warm_executors == ["1"] and st.last_warmup == {"warmed": ["1"], "rounds": 2,
                                                            "seconds": 19.1}
    assert json.loads(json.dumps(st.to_wire())) == STATUS


def test_the_starts_first_batch_says_whether_it_replayed_the_failed_drivers_batch() -> None:
    """A recovery's first commit is the batch its checkpoint held in flight, replayed as the
    failed driver planned it: its rows, not the new layout, set the ``first_commit`` step."""
    progress = {"batchId": 12, "numInputRows": 108_721,
                "durationMs": {"triggerExecution": 18_250, "queryPlanning": 900}}
    replayed = StartFirstBatch.of_progress(progress, in_flight=12)
    assert replayed == StartFirstBatch(batch_id=12, rows=108_721, seconds=18.25, replayed=True)
    assert StartFirstBatch.of_progress(progress, in_flight=None).replayed is False
    assert StartFirstBatch.of_progress(progress, in_flight=11).replayed is False  # repartitioned
    bare = StartFirstBatch.of_progress({"batchId": 3}, in_flight=None)
    assert (bare.rows, bare.seconds) == (None, None)  # a Spark that omits them: unknown
    odd = StartFirstBatch.of_progress(
        {"batchId": 4, "numInputRows": float("nan"), "durationMs": {"triggerExecution": True}},
        in_flight=None)
    assert (odd.rows, odd.seconds) == (None, None)  # never a NaN on the wire


def test_status_tolerates_a_newer_runner_and_reads_unknown_as_none() -> None:
    newer = {**STATUS, "phase": "Hibernating", "gpu": {"count": 1},
             "backlog": {"ageSeconds": None, "bytes": 10},
             "recentActions": [{**ACTION, "kind": "resize-state", "state": "paused"}]}
    del newer["partitions"]
    st = RunnerStatus.model_validate(newer)
    assert st.phase is None and st.partitions is None
    assert st.backlog.records is None and st.backlog.age_seconds is None
    assert (st.recent_actions[0].kind, st.recent_actions[0].state) == ("resize-state", "paused")
    empty = RunnerStatus.model_validate({})
    assert empty.executors.live is None and empty.rates.arrival_rows_per_second is None


REFUSALS = [
    ("not an object", "executors", [1], "body", "body: a JSON object is required"),
    ("missing target", "executors", {}, "target", "target: required"),
    ("missing partitions", "repartition", {"actionId": "a"}, "partitions",
     "partitions: required"),
    ("string target", "executors", {"target": "3"}, "target",
     "target: an integer in 0..4 (max executors)"),
    ("bool target", "executors", {"target": True}, "target",
     "target: an integer in 0..4 (max executors)"),
    ("float target", "executors", {"target": 2.5}, "target",
     "target: an integer in 0..4 (max executors)"),
    ("negative target", "executors", {"target": -1}, "target",
     "target: an integer in 0..4 (max executors)"),
    ("above the ceiling", "executors", {"target": 5}, "target",
     "target: an integer in 0..4 (max executors)"),
    ("zero partitions", "repartition", {"partitions": 0}, "partitions",
     "partitions: an integer in 1..4096"),
    ("too many partitions", "repartition", {"partitions": 4097}, "partitions",
     "partitions: an integer in 1..4096"),
    ("zero cap", "repartition", {"partitions": 2, "maxRecordsPerBatch": 0}, "maxRecordsPerBatch",
     "maxRecordsPerBatch: an integer in 1..1000000000"),
    ("string cap", "repartition", {"partitions": 2, "maxRecordsPerBatch": "9"},
     "maxRecordsPerBatch", "maxRecordsPerBatch: an integer in 1..1000000000"),
    ("numeric actionId", "stop", {"actionId": 7}, "actionId", "actionId: a string"),
    ("actionId with a space", "executors", {"target": 1, "actionId": "a b"}, "actionId",
     "actionId: 1-64 characters of [A-Za-z0-9._-]"),
    ("actionId too long", "stop", {"actionId": "x" * 65}, "actionId",
     "actionId: 1-64 characters of [A-Za-z0-9._-]"),
    ("missing target before a bad actionId", "executors", {"actionId": 7}, "target",
     "target: required"),
]


@pytest.mark.parametrize(("name", "kind", "body", "field", "message"), REFUSALS,
                         ids=[r[0] for r in REFUSALS])
def test_request_refusals_name_the_field(name: str, kind: str, body: Any, field: str,
                                         message: str) -> None:
    with pytest.raises(RequestError) as e:
        parse_request(kind, body, max_executors=4)
    assert (e.value.field, str(e.value)) == (field, message)
    assert e.value.response().to_wire() == {"error": message, "field": field}


def test_requests_parse_and_serialize() -> None:
    req = parse_request("executors", {"target": 3, "actionId": "u-1.x", "extra": True})
    assert req == ExecutorsRequest(target=3, action_id="u-1.x") and req.kind is ActionKind.EXECUTORS
    assert req.body() == {"target": 3, "actionId": "u-1.x"}
    assert parse_request(ActionKind.REPARTITION, {"partitions": 8}).body() == {"partitions": 8}
    capped = parse_request("repartition", {"partitions": 8, "maxRecordsPerBatch": 40_000})
    assert isinstance(capped, RepartitionRequest) and capped.max_records_per_batch == 40_000
    assert capped.body() == {"partitions": 8, "maxRecordsPerBatch": 40_000}
    assert parse_request("stop", {}) == StopRequest()
    assert RepartitionRequest(partitions=4096).partitions == 4096
    # without the runner's ceiling only the sign is checked; the runner checks the rest
    assert parse_request("executors", {"target": 99}).target == 99
    with pytest.raises(RequestError, match=r"target: an integer in 0\.\.4"):
        ExecutorsRequest(target=5).within(4)


def test_answers_keep_their_wire_shape() -> None:
    record = ActionRecord.model_validate(ACTION)
    assert ActionAnswer.of(record, Phase.SCALING).to_wire() == {
        "action": "ab12cd34-x", "kind": "repartition", "params": {"partitions": 8},
        "state": "succeeded", "phase": "Scaling"}
    assert ActionAnswer.of(record, Phase.RUNNING, duplicate=True).to_wire()["duplicate"] is True
    busy = ConflictResponse(error="runner is Scaling", phase=Phase.SCALING, action=None)
    assert busy.to_wire() == {"error": "runner is Scaling", "phase": "Scaling", "action": None}
    assert list(ActionRecord(kind=ActionKind.STOP).to_wire()) == list(ACTION)
