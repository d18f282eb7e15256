"""The fake runners (operators/testing/fake_runner.py) over HTTP on loopback, with a fake clock: the
control contract of operators/driver/control.py, idempotent actions, and metrics the controller
reads.

Run: ``.venv/bin/pytest tests/unit/local/test_fake_runners.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from contracts import metric_names
from contracts.history import ScalingHistory
from contracts.policy import ScalingPolicySpec
from contracts.runner_api import ActionKind, ActionState, Phase
from controller.adapters import promql
from controller.adapters.promql import Window
from controller.adapters.runner_client import RunnerClient, RunnerRefused
from controller.adapters.scrape import ScrapeSource
from controller.core import Action, Reason, decide
from operators.testing.fake_runner import FakeRunners, ModelConfig

T0 = 1_700_000_000.0
JOB = "job-0000"
TOKEN = "t0ken"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def runners(clock: Clock) -> Iterator[FakeRunners]:
    # A steady 12,000 records/s burst from t=0: two 1-core executors carry 9,000.
    config = ModelConfig(base_rate=12_000, burst_rate=12_000)
    r = FakeRunners(2, token=TOKEN, config=config, clock=clock).start()
    yield r
    r.stop()


def post(r: FakeRunners, route: str, body: Any, token: str = TOKEN) -> requests.Response:
    return requests.post(f"{r.url(JOB)}/{route}", json=body, timeout=5,
                         headers={"Authorization": f"Bearer {token}"})


CODES = [
    ("scale accepted", "executors", {"target": 4}, TOKEN, 202, "running"),
    ("repartition accepted", "repartition", {"partitions": 8}, TOKEN, 202, "running"),
    ("stop accepted", "stop", {}, TOKEN, 202, "running"),
    ("missing field", "executors", {}, TOKEN, 400, "target: required"),
    ("out of range", "executors", {"target": 999}, TOKEN, 400, "target: an integer"),
    ("not an integer", "repartition", {"partitions": "8"}, TOKEN, 400, "partitions: an"),
    ("bad action id", "executors", {"target": 3, "actionId": "a b"}, TOKEN, 400, "actionId"),
    ("body not an object", "executors", [1], TOKEN, 400, "body: a JSON object"),
    ("wrong token", "executors", {"target": 3}, "nope", 401, "bearer token"),
]


@pytest.mark.parametrize(("name", "route", "body", "token", "code", "says"), CODES,
                         ids=[c[0] for c in CODES])
def test_answer_codes(runners: FakeRunners, name: str, route: str, body: Any, token: str,
                      code: int, says: str) -> None:
    r = post(runners, route, body, token)
    assert r.status_code == code, r.text
    answer = r.json()
    assert says in (answer.get("state") or answer.get("error") or "")
    if code == 400:
        assert answer["field"] in says


def test_busy_runner_answers_409_with_the_phase(runners: FakeRunners, clock: Clock) -> None:
    assert post(runners, "repartition", {"partitions": 8}).status_code == 202
    busy = post(runners, "executors", {"target": 3})
    assert busy.status_code == 409 and busy.json()["phase"] == "Repartitioning"
    assert busy.json()["action"]["kind"] == "repartition"
    clock.now += 5.0  # repartition_seconds
    assert post(runners, "executors", {"target": 3}).status_code == 202
    assert runners.counts()[JOB] == {"repartition": 1, "executors": 1, "executors.conflict": 1}


def test_healthz_needs_no_token_and_status_does(runners: FakeRunners) -> None:
    assert requests.get(runners.url(JOB) + "/healthz", timeout=5).json() == {
        "ok": True, "phase": "Running"}
    assert requests.get(runners.url(JOB) + "/status", timeout=5).status_code == 401
    assert requests.get(runners.url("nope") + "/healthz", timeout=5).status_code == 404


def test_action_ids_make_retries_idempotent(runners: FakeRunners, clock: Clock) -> None:
    client = RunnerClient(runners.url(JOB), TOKEN)
    first = post(runners, "executors", {"target": 4, "actionId": "sj-1.scale"})
    assert first.status_code == 202 and first.json()["action"] == "sj-1.scale"
    again = post(runners, "executors", {"target": 4, "actionId": "sj-1.scale"})
    assert again.status_code == 200
    assert again.json() == {"action": "sj-1.scale", "kind": "executors",
                            "params": {"target": 4}, "state": "running", "duplicate": True,
                            "phase": "Scaling"}
    clock.now += 2.0  # scale_seconds: the action finishes
    st = client.status()
    assert st.action is None and st.executors.live == 4
    assert st.last_action is not None
    assert st.last_action.id == "sj-1.scale" and st.last_action.state == ActionState.SUCCEEDED
    late = post(runners, "executors", {"target": 4, "actionId": "sj-1.scale"})
    assert late.status_code == 200 and late.json()["state"] == "succeeded"
    assert runners.counts()[JOB] == {"executors": 1, "executors.duplicate": 2}


def test_recent_actions_keep_the_last_16_oldest_first(runners: FakeRunners,
                                                       clock: Clock) -> None:
    for i in range(18):
        assert post(runners, "executors", {"target": 2 + i % 3, "actionId": f"a{i}"}).ok
        clock.now += 2.0
    st = RunnerClient(runners.url(JOB), TOKEN).status()
    assert [a.id for a in st.recent_actions] == [f"a{i}" for i in range(2, 18)]
    raw = requests.get(runners.url(JOB) + "/status", timeout=5,
                       headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert set(raw["recentActions"][0]) == {"id", "kind", "params", "state", "started_at",
                                            "finished_at", "error", "timings", "steps",
                                            "result", "duplicates"}
    assert post(runners, "executors", {"target": 2, "actionId": "a0"}).status_code == 202


def test_client_refusals_surface(runners: FakeRunners) -> None:
    client = RunnerClient(runners.url(JOB), "wrong")
    with pytest.raises(RunnerRefused) as e:
        client.set_executors(3)
    assert e.value.status == 401


def test_model_advances_and_scaling_drains_the_backlog(runners: FakeRunners,
                                                       clock: Clock) -> None:
    client = RunnerClient(runners.url(JOB), TOKEN)
    clock.now += 30.0
    st = client.status()
    assert st.backlog.records == pytest.approx(30 * (12_000 - 9_000), rel=0.01)
    assert st.last_committed_batch == 29
    answer = client.set_executors(4)
    assert (answer.kind, answer.state, answer.phase) == (
        ActionKind.EXECUTORS, ActionState.RUNNING, Phase.SCALING)
    clock.now += 2.0 + 30.0
    assert client.status().backlog.records == 0.0
    other = RunnerClient(runners.url("job-0001"), TOKEN).status()
    assert other.executors.live == 2  # jobs are independent


def test_repartition_changes_the_state_cap(runners: FakeRunners, clock: Clock) -> None:
    client = RunnerClient(runners.url(JOB), TOKEN)
    client.set_executors(8)
    clock.now += 2.0
    capped = runners.job(JOB).per_record_seconds()
    client.repartition(8)
    clock.now += 5.0
    st = client.status()
    assert st.partitions == 8 and st.phase == Phase.RUNNING
    assert runners.job(JOB).per_record_seconds() < capped


def test_metrics_scrape_into_a_snapshot_the_engine_uses(runners: FakeRunners,
                                                        clock: Clock) -> None:
    source = ScrapeSource(runners.metrics_url)
    for _ in range(4):
        clock.now += 10.0
        s = source.snapshot(JOB, Window(30), clock.now)
    assert s.unavailable is None and s.driver_up is True
    assert (s.executors, s.cores_per_executor, s.source_partitions) == (2, 1, 16)
    assert s.processed_rate == pytest.approx(9_000, rel=0.01)
    assert s.arrival_rate == 12_000 and s.backlog_records and s.backlog_records > 0
    assert s.batches == 30 and s.batch_duration_seconds == pytest.approx(1.0)
    stages = {st.name: st for st in s.stages}
    assert stages["counts"].partitions == 4 and stages["counts"].kind == "stateful"
    assert stages["counts"].rows and stages["counts"].busy_seconds
    d = decide(s, ScalingPolicySpec(), ScalingHistory(), clock.now)
    assert d.action is not Action.HOLD, d.message
    assert d.reason in (Reason.SCALE_OUT, Reason.REPARTITION_OUT), d.message


def test_fake_serves_every_series_the_controllers_promql_reads(runners: FakeRunners) -> None:
    """Each sample name a PromQL query names is one the fake exposes for the job, and each is
    declared in contracts.metric_names (so the exporter registers it too)."""
    queried = {name for table in (promql.SCALARS, promql.PER_OPERATOR, promql.PER_STATE_OPERATOR)
               for q in table.values()
               for name in re.findall(metric_names.PREFIX + r"\w+", q)}
    declared = {s for m in metric_names.ALL for s in m.series}
    assert queried and queried <= declared, sorted(queried - declared)
    text = requests.get(runners.metrics_url(JOB), timeout=5).text
    served = {line.split("{")[0] for line in text.splitlines() if f'job="{JOB}"' in line}
    absent_while_none_runs = {metric_names.BATCH_IN_FLIGHT_ROWS.full}  # as the exporter does
    absent_before_a_restart = {metric_names.LAST_RESTART_SECONDS.full}  # fakes never restart
    absent_uncapped = {metric_names.ADMISSION_CAP.full}  # fakes start their queries uncapped
    # as the exporter: no series before an executor is lost (the counter's is per node)
    absent_before_a_loss = {metric_names.EXECUTORS_LOST.total,
                            metric_names.LAST_EXECUTOR_LOSS.full}
    absent = (absent_while_none_runs | absent_before_a_restart | absent_uncapped
              | absent_before_a_loss)
    assert queried - absent <= served, sorted(queried - served)
