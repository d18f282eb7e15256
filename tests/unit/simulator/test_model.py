"""The job model: parameters, validation errors and capacity math on hand-computed cases."""

from __future__ import annotations

import pytest

from contracts.trace import parse_trace
from controller.simulator.model import JobModel, ModelError, load_model


def test_default_capacity_is_ten_thousand_records_per_executor() -> None:
    assert JobModel().load_unit_rate == pytest.approx(10_000)


@pytest.mark.parametrize(
    ("executors", "partitions", "expected"),
    [
        # per record: source ceil(8/2)=4 waves x 4e-5/8 + state 6e-5/2 = 5e-5 s; budget 0.7 s
        (2, 2, 0.7 / 5e-5),
        # 4 slots: 2 waves x 4e-5/8 + 6e-5/4 = 2.5e-5 s
        (4, 4, 0.7 / 2.5e-5),
        # 3 slots on 8 source partitions: 3 waves; state 2 partitions: 6e-5/2
        (3, 2, 0.7 / (3 * 4e-5 / 8 + 6e-5 / 2)),
    ],
    ids=["2x2", "4x4", "3-executors-partition-bound"],
)
def test_sustainable_rate(executors: int, partitions: int, expected: float) -> None:
    assert JobModel().sustainable_rate(executors, partitions) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("executors", "expected"),
    [(1, 10_000), (4, 40_000), (8, 80_000), (16, 1 / (4e-5 / 8 + 6e-5 / 16))],
    ids=["one", "four", "eight", "source-capped"],
)
def test_fluid_rate(executors: int, expected: float) -> None:
    assert JobModel().fluid_rate(executors, 64) == pytest.approx(expected)


def test_state_grows_with_distinct_keys() -> None:
    m = JobModel()
    assert m.state_keys(0) == pytest.approx(m.initial_keys)
    assert m.state_keys(1e9) == pytest.approx(m.keys)
    assert m.state_bytes(1e6) > m.state_bytes(0)
    # same count: a plain restart; a new count also moves the state
    assert m.repartition_seconds(0, False) == m.restart_seconds
    expected = m.restart_seconds + m.initial_keys * m.state_bytes_per_key / 8.8e6
    assert m.repartition_seconds(0, True) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("overheadSeconds: -1\n", "overheadSeconds (-1)"),
        ("bogus: 1\n", "bogus"),
        ("stages:\n- {name: a, kind: stateful, costPerRecord: 1e-4}\n", "read stage"),
        ("initialKeys: 5\nkeys: 2\n", "initialKeys (5) must be <= keys (2)"),
        ("a: [1\n", ":2:1: YAML syntax error"),
        ("- 1\n", "expected a mapping"),
    ],
    ids=["negative", "unknown-key", "no-source", "cross-field", "yaml-syntax", "not-mapping"],
)
def test_model_file_errors_are_clear(tmp_path, text: str, message: str) -> None:
    f = tmp_path / "m.yaml"
    f.write_text(text)
    with pytest.raises(ModelError) as err:
        load_model(str(f))
    assert message in str(err.value)
    assert str(f) in str(err.value)


def test_model_file_overrides(tmp_path) -> None:
    f = tmp_path / "m.yaml"
    f.write_text("trigger_seconds: 2\nsourcePartitions: 16\n")
    m = load_model(str(f))
    assert (m.trigger_seconds, m.source_partitions) == (2, 16)


def test_load_trace_in_model_units() -> None:
    t = parse_trace("t,load\n0,1\n10,4\n20,0.5\n").scaled(JobModel().load_unit_rate)
    assert [t.rate_at(x) for x in (5, 10, 25)] == [10_000, 40_000, 5_000]
    assert t.arrived(20) == pytest.approx(10 * 10_000 + 10 * 40_000)


def test_docs_parameter_table_is_current() -> None:
    from pathlib import Path

    from controller.simulator.model import parameters_table

    doc = (Path(__file__).resolve().parents[3] / "docs" / "simulator.md").read_text()
    assert parameters_table() in doc, "regenerate the table in docs/simulator.md"


@pytest.mark.parametrize(
    ("text", "field"),
    [("trigger_seconds: .inf\n", "trigger_seconds"),
     ("trigger_seconds: 1.0e-300\n", "trigger_seconds"),
     ("overhead_seconds: .nan\n", "overhead_seconds"), ("keys: 100000000000000\n", "keys"),
     ("repartition_bytes_per_second: 1.0e-300\n", "repartition_bytes_per_second"),
     ("state_bytes_per_key: 1.0e+300\n", "state_bytes_per_key"),
     ("stages: [{name: s, kind: source, cost_per_record: 1.0e-320}]\n", "cost_per_record"),
     ("source_partitions: 1000000000\n", "source_partitions")],
    ids=["trigger-inf", "trigger-tiny", "overhead-nan", "keys-huge", "repartition-speed-tiny",
         "state-bytes-huge", "cost-denormal", "partitions-huge"],
)
def test_a_model_out_of_bounds_is_refused_naming_the_field(
    tmp_path, text: str, field: str
) -> None:
    """These divided by zero, overflowed or ran for minutes; now each is a ModelError."""
    f = tmp_path / "m.yaml"
    f.write_text(text)
    with pytest.raises(ModelError) as e:
        load_model(str(f))
    assert field in str(e.value), str(e.value)


@pytest.mark.timeout(60)
def test_the_partition_plan_is_scored_as_one_array_and_agrees_with_the_rate(
) -> None:
    """1,000 executors x 4,096 partitions is planned in seconds (a per-pair loop took minutes),
    and on small grids the plan is the count the model's own sustainable_rate scores best."""
    import math
    import time

    from contracts.policy import ScalingPolicySpec
    from controller.simulator import oracle_plus

    model = JobModel()
    wide = ScalingPolicySpec.model_validate(
        {"executors": {"min": 1, "max": 1000}, "partitions": {"min": 1, "max": 4096}})
    started = time.monotonic()
    p = oracle_plus.plan_partitions(model, wide)
    assert time.monotonic() - started < 10 and 1 <= p <= 4096
    for emax, pmax in ((8, 16), (20, 64), (40, 300)):
        policy = ScalingPolicySpec.model_validate(
            {"executors": {"min": 1, "max": emax}, "partitions": {"min": 1, "max": pmax}})
        best, best_score = 1, -math.inf
        for count in range(1, pmax + 1):  # the per-pair definition
            score = 0.0
            for e in range(1, emax + 1):
                ideal = model.sustainable_rate(e, max(1, min(pmax, e)))
                got = model.sustainable_rate(e, count)
                score += math.log(got / ideal) if got > 0 and ideal > 0 else -1e9
            if score > best_score + 1e-12:
                best, best_score = count, score
        assert oracle_plus.plan_partitions(model, policy) == best, (emax, pmax)
