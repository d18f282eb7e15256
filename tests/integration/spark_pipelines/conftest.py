"""A local Spark (``local[2]``) for the pipeline tests, shared by the whole folder.

Spark is started once (a session costs ~10 s here) with the job settings of
:func:`operators.query.job.spark_conf_for`. Without Java or pyspark the tests skip locally and FAIL
in CI (``CI=true``): a missing prerequisite there is a broken build, not a pass.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.realcomponents import require_spark

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "k8s" / "samples"


@pytest.fixture(scope="package")
def spark() -> Iterator[Any]:
    """One local SparkSession for every test in this folder (stopped after the last one)."""
    require_spark()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from operators.query.job import spark_conf_for

    spec = load_spec("wordcount")
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("spark-pipelines-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in spark_conf_for(spec).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    for q in session.streams.active:
        q.stop()
    session.stop()


def load_spec(name: str, tmp: Path | None = None, **updates: Any) -> Any:
    """A sample manifest's spec with its trace paths made absolute and, given ``tmp``, its
    checkpoint and sink under ``tmp``. ``updates`` replace top-level spec fields."""
    from contracts.streamjob import StreamJob

    raw = yaml.safe_load((SAMPLES / f"{name}.yaml").read_text())
    spec = raw["spec"]
    spec["source"]["trace"] = str(REPO / spec["source"]["trace"])
    for op in spec["pipeline"]:
        if op["type"] == "join":
            side = op["right"]["source"]
            side["trace"] = str(REPO / side["trace"])
    if tmp is not None:
        spec["checkpoint"]["location"] = str(tmp / "checkpoint")
        if spec["sink"].get("path"):
            spec["sink"]["path"] = str(tmp / "output")
    spec.update(updates)
    return StreamJob.model_validate(raw).spec


def capped(spec: Any, records_per_batch: int) -> Any:
    """``spec`` with its main source capped at ``records_per_batch``."""
    source = spec.source.model_copy(update={"max_records_per_batch": records_per_batch})
    return spec.model_copy(update={"source": source})


def run_available(
    spark: Any,
    spec: Any,
    *,
    backlog_seconds: float = 3.0,
    run_started_at: float | None = None,
    timeout: float = 120,
) -> Any:
    """Runs the job until it has read what had arrived when it started (trigger availableNow);
    a fresh checkpoint starts ``backlog_seconds`` into the trace. Returns the stopped query."""
    from operators.query.job import build_query

    started = time.time() - backlog_seconds if run_started_at is None else run_started_at
    writer = build_query(spark, spec, run_started_at=started)
    query = writer.trigger(availableNow=True).start()
    assert query.awaitTermination(timeout), f"query did not finish in {timeout} s"
    if query.exception() is not None:
        raise AssertionError(f"query failed: {query.exception()}")
    return query


@pytest.fixture(name="load_spec")
def _load_spec_fixture() -> Any:
    """:func:`load_spec` (helpers are fixtures: a test folder's conftest is not importable)."""
    return load_spec


@pytest.fixture(name="run_available")
def _run_available_fixture() -> Any:
    """:func:`run_available`."""
    return run_available


@pytest.fixture(name="capped")
def _capped_fixture() -> Any:
    """:func:`capped`."""
    return capped
