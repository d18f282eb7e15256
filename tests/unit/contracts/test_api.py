"""The API group/version is declared once (contracts/api.py); the models' literal must match it."""

from __future__ import annotations

from typing import get_args

import pytest

from contracts.api import GROUP_VERSION
from contracts.chaos import ChaosError, ChaosEvent, parse_chaos
from contracts.errors import ContractError
from contracts.manifests import ManifestError
from contracts.policy import ScalingPolicy
from contracts.streamjob import StreamJob
from contracts.trace import TraceError


@pytest.mark.parametrize("model", [ScalingPolicy, StreamJob], ids=lambda m: m.__name__)
def test_api_version_literal_is_the_declared_group_version(model: type) -> None:
    # A Literal cannot name a constant (mypy), so the models spell it; this keeps them honest.
    assert get_args(model.model_fields["api_version"].annotation) == (GROUP_VERSION,)
    assert model.model_fields["api_version"].default == GROUP_VERSION


def test_contract_errors_share_one_base() -> None:
    for cls in (ManifestError, TraceError, ChaosError):
        assert issubclass(cls, ContractError)


@pytest.mark.parametrize(
    ("spec", "kinds", "expected"),
    [
        ("", None, []),
        ("kill-driver@120,kill-prometheus@60", None,
         [ChaosEvent(60.0, "kill-prometheus"), ChaosEvent(120.0, "kill-driver")]),
        (" kill-executor@5 ,", None, [ChaosEvent(5.0, "kill-executor")]),
        ("kill-driver@0", ("kill-driver",), [ChaosEvent(0.0, "kill-driver")]),
    ],
    ids=["empty", "sorted-by-time", "spaces-and-trailing-comma", "host-kinds"],
)
def test_parse_chaos(spec: str, kinds: tuple[str, ...] | None, expected: list[ChaosEvent]) -> None:
    got = parse_chaos(spec) if kinds is None else parse_chaos(spec, kinds)
    assert got == expected


@pytest.mark.parametrize(
    ("spec", "kinds", "message"),
    [
        ("kill-everything@3", None, "kind must be one of kill-driver, kill-executor"),
        ("kill-executor@3", ("kill-driver",), "kind must be one of kill-driver"),
        ("kill-driver@soon", None, "'soon' is not a number of seconds"),
        ("kill-driver@-1", None, "the time must be a number of seconds >= 0"),
        ("kill-driver@inf", None, "the time must be a number of seconds >= 0"),
    ],
    ids=["unknown-kind", "kind-the-host-cannot-inject", "not-a-number", "negative", "infinite"],
)
def test_parse_chaos_errors_name_the_part(
    spec: str, kinds: tuple[str, ...] | None, message: str
) -> None:
    with pytest.raises(ChaosError) as e:
        parse_chaos(spec) if kinds is None else parse_chaos(spec, kinds)
    assert message in str(e.value)
    assert repr(spec.strip()) in str(e.value)
