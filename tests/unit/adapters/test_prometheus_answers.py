"""The Prometheus adapter against hostile answers (KEDA's table): each becomes unknown."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.history import ScalingHistory
from contracts.policy import ScalingPolicySpec
from controller.adapters.prometheus import MetricsUnavailable, PrometheusSource
from controller.adapters.promql import SCALARS, Window
from controller.core import Action, Reason, decide

NOW = 1_000.0


def sample(value: str, **labels: str) -> dict[str, Any]:
    return {"metric": labels, "value": [NOW, value]}


def source(answers: dict[str, list[dict[str, Any]]]) -> PrometheusSource:
    """Answers keyed by snapshot field; every other query returns a healthy value."""
    window = Window(30)
    by_query = {window.render(q, "j"): f for f, q in SCALARS.items()}

    def query(q: str) -> list[dict[str, Any]]:
        field = by_query.get(q)
        if field in answers:
            return answers[field]
        if field == "driver_up":
            return [sample("1")]
        if field is not None:
            return [sample("4")]
        return []

    return PrometheusSource(query=query)


HOSTILE = [
    ("empty result", []),
    ("NaN", [sample("NaN")]),
    ("+Inf", [sample("+Inf")]),
    ("-Inf", [sample("-Inf")]),
    ("negative", [sample("-3")]),
    ("not a number", [sample("lots")]),
    ("several series", [sample("4", instance="a"), sample("9", instance="b")]),
    ("malformed sample", [{"metric": {}}]),
]


@pytest.mark.parametrize(("name", "answer"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_answer_is_unknown_and_the_engine_holds(
    name: str, answer: list[dict[str, Any]]
) -> None:
    s = source({"arrival_rate": answer, "executors": answer}).snapshot("j", Window(30), NOW)
    assert s.arrival_rate is None and s.executors is None
    assert s.processed_rate == 4  # the healthy series are still read
    d = decide(s, ScalingPolicySpec(), ScalingHistory(), NOW)
    assert (d.action, d.reason) == (Action.HOLD, Reason.NO_METRICS)
    assert "unknown executors and arrival rate" in d.message


def test_one_series_missing_leaves_only_that_field_unknown() -> None:
    s = source({"backlog_age_seconds": []}).snapshot("j", Window(30), NOW)
    assert s.backlog_age_seconds is None and s.backlog_records == 4


def test_driver_down_is_read_from_up() -> None:
    s = source({"driver_up": [sample("0")]}).snapshot("j", Window(30), NOW)
    assert s.driver_up is False


def test_an_outage_is_no_data_with_the_reason() -> None:
    def query(q: str) -> list[dict[str, Any]]:
        raise MetricsUnavailable("Prometheus at http://127.0.0.1:1: ConnectionError")

    s = PrometheusSource(query=query).snapshot("j", Window(30), NOW)
    assert s.observed_at is None and s.unavailable and "ConnectionError" in s.unavailable
    d = decide(s, ScalingPolicySpec(), ScalingHistory(), NOW)
    assert d.reason is Reason.NO_METRICS and "ConnectionError" in d.message


def test_per_operator_series_become_stages() -> None:
    def query(q: str) -> list[dict[str, Any]]:
        if "stage_busy_seconds_total" in q:
            return [
                sample("2.0", operator="source", kind="source"),
                sample("NaN", operator="counts", kind="stateful"),
            ]
        if "state_operator_partitions" in q:
            return [sample("8", operator="counts")]
        if "state_bytes" in q:
            return [sample("1e6", operator="counts")]
        return []

    s = PrometheusSource(query=query).snapshot("j", Window(30), NOW)
    stages = {st.name: st for st in s.stages}
    assert stages["source"].busy_seconds == 2.0
    assert stages["counts"].kind == "stateful" and stages["counts"].busy_seconds is None
    assert stages["counts"].partitions == 8 and stages["counts"].state_bytes == 1e6
