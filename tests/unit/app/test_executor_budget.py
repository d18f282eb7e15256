"""How many CPU-capped executors the demo runs on a machine, and how the cap is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.demo import executors_that_fit
from app.demo_cli import executor_cpus
from app.errors import DemoError
from contracts.spark import ExecutorSpec

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("cpus", "cores", "expected"),
    [
        (0.25, 2, 6),  # this machine: 1.5 cores for executors
        (0.5, 2, 3),
        (0.3, 2, 5),
        (1.0, 2, 1),
        (2.0, 2, 1),  # never fewer than one
        (0.25, 8, 30),
    ],
    ids=["quarter-2", "half-2", "0.3-2", "whole-2", "more-than-the-machine", "quarter-8"],
)
def test_executors_that_fit_beside_the_driver(cpus: float, cores: int, expected: int) -> None:
    assert executors_that_fit(cpus, cores) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, "job"), ("none", None), ("NONE", None), ("0.25", 0.25), ("250m", 0.25), ("1", 1.0)],
    ids=["absent-job", "none", "none-upper", "cores", "millicores", "one"],
)
def test_executor_cpu_argument(value: str | None, expected: object) -> None:
    assert executor_cpus(value) == expected


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "quarter", "m"])
def test_a_bad_executor_cpu_is_refused_naming_the_flag(value: str) -> None:
    with pytest.raises(DemoError, match="--executor-cpu"):
        executor_cpus(value)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, None),
        ({"cpu": "250m"}, 0.25),
        ({"cpu": "1.5"}, 1.5),
        ({"cpu": "250m", "cpuLimit": "500m"}, 0.5),  # the limit is the quota
        ({"cpuLimit": "2"}, 2.0),
    ],
    ids=["none", "request-milli", "request-cores", "limit-wins", "limit-only"],
)
def test_the_executors_cpu_limit_in_cores(fields: dict[str, str], expected: float | None) -> None:
    assert ExecutorSpec.model_validate(fields).cpu_limit_cores() == expected


def test_the_default_demo_composes_capped_executors_a_burst_and_its_baselines() -> None:
    """`make demo`'s job, trace and policy, read as the demo reads them: half-core executors
    (three fit beside the driver on 2 cores), state partitions for all three, an admission cap,
    and a burst that one executor cannot carry but the three can — static at the trace's mean
    is one executor, at its peak two."""
    from app.demo import DEFAULT_JOB, DEFAULT_TRACE, policy_for
    from app.demo_cli import static_baselines
    from contracts.manifests import load_job, load_policy
    from contracts.trace import load_trace

    job = load_job(DEFAULT_JOB)
    cpus = job.spec.executors.cpu_limit_cores()
    assert cpus == 0.5
    fit = executors_that_fit(cpus, 2)
    assert fit == 3
    assert job.spec.state_partitions == fit  # scale-out re-spreads state, no rewrite
    assert job.spec.source is not None and job.spec.source.max_records_per_batch == 300_000
    policy = load_policy(policy_for(DEFAULT_JOB)).spec
    assert policy_for(DEFAULT_JOB).name == "half-core-executors.yaml"
    assert policy.executors.max >= fit
    assert policy.timing.executor_startup_seconds == 30  # measured at half a core
    trace = load_trace(str(DEFAULT_TRACE))
    assert trace.unit == "load"
    assert 1.0 < trace.peak() <= fit * 0.7  # more than one executor, within three at target
    assert static_baselines(trace, None) == [("static-mean", 1), ("static-peak", 2)]


def test_the_demo_runs_the_policy_the_job_names(tmp_path: Path) -> None:
    from app.demo import DEFAULT_POLICY, POLICIES, policy_for

    sample = REPO / "k8s" / "samples" / "wordcount-demo.yaml"
    assert policy_for(sample) == POLICIES / "default.yaml"
    job = tmp_path / "job.yaml"
    job.write_text(sample.read_text().replace("name: default", "name: latency-first"))
    assert policy_for(job) == POLICIES / "latency-first.yaml"
    job.write_text(sample.read_text().replace("name: default", "name: not-bundled"))
    assert policy_for(job) == DEFAULT_POLICY  # a cluster's own policy: the demo has none
