"""The demo's job on disk and its verdict: the run's manifest (trace, load unit, fresh
checkpoint and sink) and the exactly-once check over what it committed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.errors import DemoError
from contracts.streamjob import StreamJob


def verify_exactly_once(spec: Any) -> dict[str, Any]:
    """The exactly-once verdict (a local Spark session reads the checkpoint and the sink)."""
    import os
    import sys

    from pyspark.sql import SparkSession

    from operators.verifier import verify

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers import the burst source
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("verify")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    try:
        result = verify(spec, spark=spark)
    except Exception as e:  # a verdict we cannot reach is not exactly-once
        return {"exactly_once": False, "verification_error": f"{type(e).__name__}: {e}"}
    finally:
        spark.stop()
    committed = sum(result.records.values()) if result.records else None
    return {
        "exactly_once": bool(result.ok),
        "records_in": committed,
        "records_out": result.keys_checked,
        "verification": {k: v for k, v in result.__dict__.items() if k != "examples"},
    }


def write_run_job(
    job: StreamJob,
    trace: Path,
    unit: float | None,
    out: Path,
    initial: int | None,
    partitions: int | None = None,
) -> Path:
    """The job manifest for this run: the trace, the load unit, fresh checkpoint and sink."""
    data = job.to_wire()
    data.pop("status", None)
    src = data["spec"]["source"]
    if src.get("type") != "burst":
        raise DemoError(
            f"the demo replays a trace through the burst source; {job.metadata.name} "
            f"reads {src.get('type')}"
        )
    src["trace"] = str(trace.resolve())
    if unit is not None:
        src["loadUnitRate"] = unit
    data["spec"]["checkpoint"] = {"location": str(out / "checkpoint")}
    data["spec"]["sink"] = {**data["spec"]["sink"], "type": "files", "path": str(out / "sink")}
    if initial is not None:
        data["spec"].setdefault("executors", {})["initial"] = initial
    if partitions is not None:
        data["spec"]["statePartitions"] = partitions
    path = out / "job.yaml"
    import yaml

    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path
