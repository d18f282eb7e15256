"""A read stage capped by its source partitions (a Kafka topic with too few partitions): the
engine names the cap and the minPartitions that would lift it, instead of adding executors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from contracts.history import ScalingHistory
from contracts.policy import ScalingPolicySpec
from controller.core import Action, BottleneckKind, MetricsSnapshot, Reason, StageMetrics, decide
from controller.core.capacity import CapacityModel
from controller.core.diagnosis import source_partitions_needed
from tests.unit.core.factories import NOW, policy, snapshot

PARSE_COST = 9e-5
"""Task-seconds per record of the read stage (parse + project): the heavy one."""
COUNT_COST = 1e-5


def kafka_job(*, topic_partitions: int, executors: int, **kw: Any) -> MetricsSnapshot:
    """A Kafka read stage doing most of the work, then a light stateful count."""
    rows = 270_000.0
    stages = (
        StageMetrics(name="source", kind="source", partitions=topic_partitions, rows=rows,
                     busy_seconds=rows * PARSE_COST),
        StageMetrics(name="counts", kind="stateful", partitions=8, rows=rows,
                     busy_seconds=rows * COUNT_COST, state_bytes=5e7),
    )  # fmt: skip
    return snapshot(stages=stages, executors=executors, source_partitions=topic_partitions, **kw)


@dataclass(frozen=True)
class Case:
    id: str
    observed: MetricsSnapshot
    expected: tuple[Action, Reason]
    message_has: str
    policy: ScalingPolicySpec = field(default_factory=ScalingPolicySpec)


CASES = [
    Case(
        "one-partition topic, one executor: hold and suggest minPartitions, never scale out",
        kafka_job(topic_partitions=1, executors=1, arrival=15_000),
        (Action.HOLD, Reason.SOURCE_PARTITION_BOUND),
        "minPartitions to 3 (or give the topic 3 partitions) and run 3 executor(s)",
    ),
    Case(
        "two partitions, two executors, 20k/s: 4 partitions on 4 executors carry it at 70%",
        kafka_job(topic_partitions=2, executors=2, arrival=20_000),
        (Action.HOLD, Reason.SOURCE_PARTITION_BOUND),
        "minPartitions to 4",
    ),
    Case(
        "no partition count within executors.max is enough: say so",
        kafka_job(topic_partitions=2, executors=2, arrival=60_000, backlog=1e5, age=10),
        (Action.HOLD, Reason.SOURCE_PARTITION_BOUND),
        "even 8 would not carry it within executors.max=8",
    ),
    Case(
        "enough partitions for the slots: an ordinary scale-out",
        kafka_job(topic_partitions=8, executors=2, arrival=30_000, backlog=3e5, age=15),
        (Action.SCALE, Reason.SCALE_OUT),
        "scale out 2 ->",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_source_partition_bound(case: Case) -> None:
    d = decide(case.observed, case.policy, ScalingHistory(), NOW)
    assert (d.action, d.reason) == case.expected, d.message
    assert case.message_has in d.message, d.message
    if case.expected[1] is Reason.SOURCE_PARTITION_BOUND:
        assert d.diagnosis.kind is BottleneckKind.SOURCE_PARTITIONS
        assert d.target_executors is None


def test_partitions_needed_is_the_least_that_reaches_the_target() -> None:
    pol = ScalingPolicySpec()
    model = CapacityModel.from_snapshot(kafka_job(topic_partitions=2, executors=2))
    assert model is not None
    p, n = source_partitions_needed(model, 20_400, pol) or (0, 0)
    assert (p, n) == (4, 4)
    # 4 partitions on 4 executors: 20,400 * (9e-5/4 + 1e-5/2) / 0.9 = 62% <= 70%; 3 would be 79%


def test_uncapped_read_stage_needs_no_partitions() -> None:
    s = kafka_job(topic_partitions=2, executors=2).model_copy(update={"source_partitions": None})
    stages = tuple(st.model_copy(update={"partitions": None}) for st in s.stages)
    model = CapacityModel.from_snapshot(s.model_copy(update={"stages": stages}))
    assert model is not None
    assert source_partitions_needed(model, 20_000, ScalingPolicySpec()) is None


def test_suggestion_respects_executors_max() -> None:
    model = CapacityModel.from_snapshot(kafka_job(topic_partitions=1, executors=1))
    assert model is not None
    small = policy(executors={"min": 1, "max": 3})
    # 3 partitions on 3 executors: 15,000 * (9e-5/3 + 1e-5) / 0.9 = 67%, but 16,200 needs 72%
    assert source_partitions_needed(model, 15_000, small) == (3, 3)
    assert source_partitions_needed(model, 16_200, small) is None


def test_a_backlog_the_cap_cannot_drain_is_diagnosed_source_bound() -> None:
    """Arrival alone fits one partition; arrival + backlog / catch-up does not."""
    s = kafka_job(topic_partitions=1, executors=1, arrival=5_000, backlog=600_000, age=40)
    d = decide(s, ScalingPolicySpec(), ScalingHistory(), NOW)
    assert d.reason is Reason.SOURCE_PARTITION_BOUND, d.message
    assert d.diagnosis.kind is BottleneckKind.SOURCE_PARTITIONS
    assert "catching up needs" in d.diagnosis.evidence[-1]
