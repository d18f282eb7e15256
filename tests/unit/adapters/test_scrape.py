"""ScrapeSource against an exporter built from contracts.metric_names (served on loopback by
prometheus_client, as the runner's is), with a fake clock: the time of each scrape is the ``now``
passed in. It sets the values the runner's exporter sets for the same batches; that the runner
registers exactly these metrics is tests/integration/metrics/test_exporter_contract.py (Spark).

Run: ``.venv/bin/pytest tests/unit/adapters/test_scrape.py``.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Summary,
    disable_created_metrics,
    generate_latest,
    start_http_server,
)

from contracts import metric_names as M
from contracts.history import ScalingHistory
from contracts.policy import ScalingPolicySpec
from contracts.ports import free_port
from controller.adapters import promql
from controller.adapters.promql import Window
from controller.adapters.scrape import (
    PER_OPERATOR_RULES,
    PER_STATE_OPERATOR_RULES,
    SCALAR_RULES,
    ScrapeSource,
)
from controller.core import Action, Reason, decide

JOB = "wordcount"
T0 = 1_700_000_000.0
STEP = 10.0
"""Seconds between evaluations (= scrapes) on the fake clock."""
ROWS_PER_BATCH = 5_000.0
BATCHES_PER_STEP = 2


disable_created_metrics()  # as the runner's exporter does


class ContractMetrics:
    """Every metric of contracts.metric_names in one registry, labelled for ``job``."""

    def __init__(self, job: str) -> None:
        self.job = job
        self.registry = CollectorRegistry()
        kinds = {"gauge": Gauge, "counter": Counter, "summary": Summary}
        self.m: dict[M.Metric, Any] = {
            m: kinds[m.type](m.full, m.help, list(m.labels), registry=self.registry)
            for m in M.ALL
        }

    def of(self, metric: M.Metric, *labels: str) -> Any:
        return self.m[metric].labels(self.job, *labels)

    def set_executors(self, live: int, target: int, cores: int) -> None:
        self.of(M.EXECUTORS).set(live)
        self.of(M.TARGET_EXECUTORS).set(target)
        self.of(M.EXECUTOR_CORES).set(cores)
        self.of(M.TASK_SLOTS).set(live * cores)


class Runner:
    """One runner's metrics on 127.0.0.1, set as the runner's exporter sets them per batch."""

    def __init__(self, job: str = JOB) -> None:
        self.metrics = ContractMetrics(job)
        self.port = free_port()
        self.server, self.thread = start_http_server(
            self.port, addr="127.0.0.1", registry=self.metrics.registry)
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self.batch = 0
        m = self.metrics
        m.set_executors(live=2, target=2, cores=1)
        m.of(M.TRIGGER_INTERVAL).set(1.0)
        m.of(M.SOURCE_PARTITIONS).set(8)
        m.of(M.EXECUTOR_MEMORY_RATIO).set(0.25)

    def run_batches(self, n: int, at: float) -> None:
        """``n`` batches of ROWS_PER_BATCH: 0.6 s each (0.45 s addBatch), one stateful operator
        ``counts`` (1,000 keys, 4 partitions), 1,000 records waiting for 1.5 s; a read stage
        (8 tasks, 0.2 s busy) and the stateful stage (4 tasks, 0.3 s busy)."""
        m = self.metrics
        for _ in range(n):
            m.of(M.BATCHES).inc()
            m.of(M.INPUT_ROWS).inc(ROWS_PER_BATCH)
            m.of(M.LAST_BATCH_DURATION).set(0.6)
            m.of(M.BATCH_DURATION).observe(0.6)
            m.of(M.LAST_BATCH_OVERHEAD).set(0.15)
            m.of(M.BATCH_OVERHEAD).observe(0.15)
            m.of(M.INPUT_RATE).set(500.0)
            m.of(M.LAST_COMMITTED_BATCH).set(self.batch)
            for metric, value in ((M.STATE_ROWS, 1_000), (M.STATE_MEMORY, 2e6),
                                  (M.STATE_BYTES, 3e6), (M.STATE_OPERATOR_PARTITIONS, 4)):
                m.of(metric, "counts").set(value)
            m.of(M.STATE_PARTITIONS).set(4)
            m.of(M.BACKLOG_RECORDS).set(1_000)
            m.of(M.BACKLOG_AGE).set(1.5)
            for op, kind, tasks, busy, wall, longest, median in (
                ("source", "source", 8, 0.2, 0.1, 0.03, 0.02),
                ("counts", "stateful", 4, 0.3, 0.15, 0.08, 0.07),
            ):
                m.of(M.STAGE_ROWS, op, kind).inc(ROWS_PER_BATCH)
                m.of(M.STAGE_BUSY, op, kind).inc(busy)
                m.of(M.STAGE_WALL, op, kind).inc(wall)
                m.of(M.STAGE_BATCHES, op, kind).inc()
                m.of(M.STAGE_TASKS, op, kind).set(tasks)
                m.of(M.STAGE_MAX_TASK, op, kind).set(longest)
                m.of(M.STAGE_MEDIAN_TASK, op, kind).set(median)
            self.batch += 1
        m.of(M.LAST_PROGRESS).set(at - 2.0)  # the fake clock, not time.time()
        m.of(M.ARRIVAL_RATE).set(500.0)

    def close(self) -> None:
        """Stop serving without waiting out serve_forever's 0.5 s poll (keeps the tier fast)."""

        def stop() -> None:
            self.server.shutdown()
            self.server.server_close()

        threading.Thread(target=stop, daemon=True).start()


@pytest.fixture
def runner() -> Iterator[Runner]:
    r = Runner()
    yield r
    r.close()


@dataclass
class Case:
    """A scenario: ``steps`` scrapes STEP seconds apart, each after ``before(runner, i, t)``."""

    name: str
    steps: int
    expected: dict[str, Any]
    before: Callable[[Runner, int, float], None] = lambda r, i, t: r.run_batches(
        BATCHES_PER_STEP, t
    )
    window: Window = field(default_factory=lambda: Window(30, arrival_seconds=10))


def _hostile(r: Runner, i: int, t: float) -> None:
    r.run_batches(BATCHES_PER_STEP, t)
    r.metrics.of(M.EXECUTORS).set(math.nan)
    r.metrics.of(M.ARRIVAL_RATE).set(math.inf)
    r.metrics.of(M.BACKLOG_RECORDS).set(-5)


def _idle(r: Runner, i: int, t: float) -> None:
    if i == 0:
        r.run_batches(BATCHES_PER_STEP, t)


# Steady: 2 batches of 5,000 rows per 10 s step; the 30 s window holds the scrapes at t-20, t-10
# and t, so Prometheus extrapolates the 20 s between them to the 30 s window (x 1.5).
CASES = [
    Case("steady counters", 4, {
        "driver_up": True, "processed_rate": 1_000.0, "batches": 6, "executors": 2,
        "cores_per_executor": 1, "target_executors": 2, "source_partitions": 8,
        "trigger_interval_seconds": 1.0, "backlog_records": 1_000.0, "backlog_age_seconds": 1.5,
        "batch_duration_seconds": 0.6, "overhead_seconds": 0.15, "arrival_rate": 500.0,
        "seconds_since_progress": 2.0, "failed_tasks": None, "memory_used_ratio": 0.25,
        "last_committed_batch": 7,
    }),
    Case("one sample only", 1, {
        "driver_up": True, "processed_rate": None, "batches": None,
        "batch_duration_seconds": None, "executors": 2, "arrival_rate": 500.0,
    }),
    Case("idle job: rates are zero, not unknown", 3, {
        "processed_rate": 0.0, "batches": 0, "batch_duration_seconds": None,
    }, before=_idle),
    Case("NaN, Inf and negative are unknown", 3, {
        "executors": None, "arrival_rate": None, "backlog_records": None,
        "processed_rate": 1_000.0,
    }, before=_hostile),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_scrape_table(case: Case, runner: Runner) -> None:
    source = ScrapeSource({JOB: runner.url}.get)
    for i in range(case.steps):
        t = T0 + i * STEP
        case.before(runner, i, t)
        s = source.snapshot(JOB, case.window, t)
    assert s.unavailable is None and s.observed_at == t
    for name, want in case.expected.items():
        got = getattr(s, name)
        assert got == (pytest.approx(want) if isinstance(want, float) else want), name


def test_steady_stages_match_the_exporter(runner: Runner) -> None:
    source = ScrapeSource({JOB: runner.url}.get)
    for i in range(4):
        runner.run_batches(BATCHES_PER_STEP, T0 + i * STEP)
        s = source.snapshot(JOB, Window(30), T0 + i * STEP)
    by_name = {st.name: st for st in s.stages}
    assert set(by_name) == {"source", "counts"}
    counts = by_name["counts"]
    assert (counts.kind, counts.partitions) == ("stateful", 4)
    assert (counts.state_rows, counts.state_bytes, counts.state_memory_bytes) == (1e3, 3e6, 2e6)
    assert counts.rows == pytest.approx(6 * ROWS_PER_BATCH)  # 6 batches extrapolated in 30 s
    assert counts.busy_seconds == pytest.approx(6 * 0.3)
    assert counts.max_task_seconds == 0.08 and counts.median_task_seconds == 0.07
    assert by_name["source"].partitions == 8 and by_name["source"].kind == "source"
    d = decide(s, ScalingPolicySpec(), ScalingHistory(), T0 + 3 * STEP)
    assert d.reason not in (Reason.NO_METRICS, Reason.INSUFFICIENT_DATA), d.message


def test_first_evaluation_is_blind_and_the_engine_holds(runner: Runner) -> None:
    runner.run_batches(BATCHES_PER_STEP, T0)
    s = ScrapeSource({JOB: runner.url}.get).snapshot(JOB, Window(30), T0)
    assert s.processed_rate is None and s.batches is None
    assert all(st.busy_seconds is None for st in s.stages)
    d = decide(s, ScalingPolicySpec(), ScalingHistory(), T0)
    assert (d.action, d.reason) == (Action.HOLD, Reason.INSUFFICIENT_DATA), d.message


def test_counter_reset_when_the_runner_restarts(runner: Runner) -> None:
    """Scrapes 1-2 from the first runner, 3-4 from its successor (counters start over)."""
    second = Runner()
    try:
        urls = {JOB: runner.url}
        source = ScrapeSource(urls.get)
        for i in range(4):
            if i == 2:
                urls[JOB] = second.url
            (runner if i < 2 else second).run_batches(BATCHES_PER_STEP, T0 + i * STEP)
            s = source.snapshot(JOB, Window(30), T0 + i * STEP)
        # Counter values 20k, 10k (reset), 20k over 20 s: 10k + 10k added back, x 1.5.
        assert s.processed_rate == pytest.approx(1_000.0)
        assert s.batches == 6
    finally:
        second.close()


def test_unreachable_runner_is_unavailable_not_zero() -> None:
    url = f"http://127.0.0.1:{free_port()}/metrics"  # nothing listens here
    s = ScrapeSource({JOB: url}.get).snapshot(JOB, Window(30), T0)
    assert s.observed_at is None and s.executors is None and s.processed_rate is None
    assert s.unavailable and url in s.unavailable and "ConnectionError" in s.unavailable
    d = decide(s, ScalingPolicySpec(), ScalingHistory(), T0)
    assert (d.action, d.reason) == (Action.HOLD, Reason.NO_METRICS) and url in d.message


@pytest.mark.parametrize(
    ("name", "answer", "why"),
    [
        ("HTTP 500", (500, "oops"), "HTTP 500"),
        ("not exposition", (200, "this is { not metrics"), "ValueError"),
        ("no URL registered", None, "no metrics URL"),
    ],
    ids=["HTTP 500", "not exposition", "no URL registered"],
)
def test_bad_answers_are_unavailable(name: str, answer: tuple[int, str] | None, why: str) -> None:
    url = None if answer is None else "http://runner/metrics"
    s = ScrapeSource(lambda job: url, fetch=lambda u: answer or (0, "")).snapshot(
        JOB, Window(30), T0
    )
    assert s.observed_at is None and s.unavailable and why in s.unavailable


def test_foreign_job_label_is_not_read() -> None:
    """A runner exporting another job's series (a mislabelled runner, or two behind one port)."""
    mine, other = ContractMetrics(JOB), ContractMetrics("other")
    mine.set_executors(live=2, target=2, cores=1)
    other.set_executors(live=9, target=9, cores=4)
    both = generate_latest(other.registry).decode() + generate_latest(mine.registry).decode()
    s = ScrapeSource(lambda job: "http://r/metrics", fetch=lambda u: (200, both)).snapshot(
        JOB, Window(30), T0
    )
    assert (s.executors, s.cores_per_executor) == (2, 1)
    only_other = generate_latest(other.registry).decode()
    s = ScrapeSource(lambda job: "http://r/metrics", fetch=lambda u: (200, only_other)).snapshot(
        JOB, Window(30), T0
    )
    assert s.observed_at is None and s.unavailable and "job='wordcount'" in s.unavailable


def test_ring_is_trimmed_by_window_and_count(runner: Runner) -> None:
    source = ScrapeSource({JOB: runner.url}.get, max_scrapes=4)
    for i in range(6):
        source.snapshot(JOB, Window(60), T0 + i * STEP)
    assert [t - T0 for t, _ in source.scrapes(JOB)] == [20, 30, 40, 50]  # count bound
    source.snapshot(JOB, Window(15), T0 + 60)
    assert [t - T0 for t, _ in source.scrapes(JOB)] == [50, 60]  # window bound: (45, 60]
    source.forget(JOB)
    assert source.scrapes(JOB) == []


# -- the tables stay in step with promql.py --------------------------------------------------

_FUNCTION_IN_PROMQL = {
    "up": "up{", "max": "max", "increase": "increase(", "rate": "rate(", "age": "time() - max(",
    "rate_ratio": "rate(", "avg_over_arrival": "avg_over_time(",
}
TABLES = [
    ("SCALARS", promql.SCALARS, SCALAR_RULES),
    ("PER_OPERATOR", promql.PER_OPERATOR, PER_OPERATOR_RULES),
    ("PER_STATE_OPERATOR", promql.PER_STATE_OPERATOR, PER_STATE_OPERATOR_RULES),
]


@pytest.mark.parametrize(("name", "queries", "rules"), TABLES, ids=[t[0] for t in TABLES])
def test_every_promql_field_has_a_rule(
    name: str, queries: dict[str, str], rules: dict[str, Any]
) -> None:
    missing = sorted(set(queries) - set(rules))
    assert not missing, f"promql.{name} fields scrape.py does not compute: {missing}"
    assert not set(rules) - set(queries), f"scrape.py rules for fields promql.{name} lacks"


@pytest.mark.parametrize(("name", "queries", "rules"), TABLES, ids=[t[0] for t in TABLES])
def test_every_rule_reads_what_its_query_reads(
    name: str, queries: dict[str, str], rules: dict[str, Any]
) -> None:
    for fld, rule in rules.items():
        query = queries[fld]
        assert _FUNCTION_IN_PROMQL[rule.function] in query, (fld, query)
        for sample in rule.samples():
            assert sample + "{" in query, (fld, sample, query)
        named = set(re.findall(M.PREFIX + r"\w+", query))
        assert named == set(rule.samples()) or rule.function == "up", (fld, named)
        by = re.search(r"\bby \(([^)]*)\)", query)
        grouping = tuple(x.strip() for x in by.group(1).split(",")) if by else ()
        assert grouping == rule.by, (fld, rule.by, query)
