"""What ``load 1`` means for a job on this machine: one executor's measured capacity.

A ``t,load`` trace gives load in multiples of one executor's capacity, so a scenario means the
same on a 2-core laptop and a 64-core server. The capacity is measured once (one executor,
the source far ahead so every batch is full) as records per second of busy task time, the same
yardstick the engine sizes with, and cached per job shape and machine. Wall-clock throughput
would mix in the per-batch overhead and whatever else the machine runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from app.errors import AppError
from contracts.ports import free_port
from contracts.streamjob import StreamJob
from controller.local.processes import RunnerProcess

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "stream-autoscaler"
MEASURE_TIMEOUT_SECONDS = 300.0
"""Give up after this long (a loaded 2-core machine needs ~60 s)."""
WARMUP_BATCHES = 2
"""The first batches compile code and open RocksDB; they are not counted."""
MEASURED_BATCHES = 6
"""Full batches to take the median over."""
CALIBRATION_BATCH_RECORDS = 200_000
"""Records per calibration batch (or the job's own cap if lower): a few seconds of work."""
PROGRESS_EVERY_SECONDS = 10.0
"""How often a calibration in progress says how far it got."""


class CalibrationError(AppError):
    """The job made too little progress to measure its capacity."""


SATURATING_RATE = 5_000_000
"""Records/s the calibration source offers: far more than one executor can take."""

log = structlog.get_logger("stream_autoscaler.calibrate")


def _key(job: StreamJob, executor_cpus: float | None = None) -> str:
    import pyspark

    spec = job.spec
    if spec.source is None:
        raise CalibrationError("calibration measures a declared pipeline (source, operators, "
                               "sink); this job runs a script or a function")
    shape: dict[str, object] = {
        "pipeline": [op.to_wire() for op in spec.pipeline or []],
        "source": {
            k: v
            for k, v in spec.source.to_wire().items()
            if k not in ("trace", "maxRecordsPerBatch", "loadUnitRate")
        },
        "executors": spec.executors.to_wire(),
        "trigger": spec.trigger.to_wire(),
        "cpus": os.cpu_count(),
        "pyspark": pyspark.__version__,
        "method": "busy-time",
    }
    if executor_cpus is not None:  # a capped executor is another unit (uncapped keys unchanged)
        shape["executor_cpus"] = executor_cpus
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]


def _number(value: object) -> float:
    """A stage figure as read from Spark's REST API (a number, or absent: 0)."""
    return float(value) if isinstance(value, int | float) else 0.0


def true_rate(stages: list[dict[str, object]]) -> float | None:
    """Source records per second of busy task time over all stages of one batch: what one
    task slot processes when it is never idle (DS2's true rate; the engine's own yardstick)."""
    rows = sum(_number(s.get("rows")) for s in stages if s.get("kind") == "source")
    busy = sum(_number(s.get("busy_seconds")) for s in stages)
    if rows <= 0 or busy <= 0:
        return None
    return rows / busy


def load_unit_rate(
    job: StreamJob,
    master: str,
    workdir: Path,
    executor_cpus: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> float:
    """Records/s one executor sustains for ``job`` (cached in ~/.cache/stream-autoscaler).

    ``executor_cpus`` is the CPU quota the cluster's executors run under (part of the cache
    key: a capped executor is a different unit); ``progress`` gets a line every few seconds.
    """
    key = _key(job, executor_cpus)
    cache_file = CACHE / "calibration.json"
    cached: dict[str, float] = {}
    if cache_file.exists():
        try:
            cached = json.loads(cache_file.read_text(encoding="utf-8"))
        except ValueError:
            cached = {}
    if key in cached:
        return float(cached[key])
    rate = measure(job, master, workdir, progress)
    cached[key] = rate
    CACHE.mkdir(parents=True, exist_ok=True)
    cache_file.write_text(json.dumps(cached, indent=1), encoding="utf-8")
    return rate


def measure(
    job: StreamJob, master: str, workdir: Path, progress: Callable[[str], None] | None = None
) -> float:
    """Runs the job on one executor with a saturating source; the median true rate."""
    import yaml

    workdir.mkdir(parents=True, exist_ok=True)
    trace = workdir / "saturate.csv"
    trace.write_text(f"t,input_rate\n0,{SATURATING_RATE}\n", encoding="utf-8")
    data = job.to_wire()
    data.pop("status", None)
    source = {k: v for k, v in data["spec"]["source"].items() if k != "loadUnitRate"}
    cap = min(
        source.get("maxRecordsPerBatch") or CALIBRATION_BATCH_RECORDS, CALIBRATION_BATCH_RECORDS
    )
    data["spec"]["source"] = {**source, "trace": str(trace), "maxRecordsPerBatch": cap}
    data["spec"]["checkpoint"] = {"location": str(workdir / "checkpoint")}
    data["spec"]["sink"] = {**data["spec"]["sink"], "type": "noop"}
    data["spec"].pop("attach", None)
    job_file = workdir / "job.yaml"
    job_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    token = workdir / "token"
    token.write_text(secrets.token_urlsafe(16), encoding="utf-8")
    runner = RunnerProcess(job_file, master, workdir, free_port(), free_port(), 1, 1, token)
    started = time.monotonic()
    say = progress or (lambda _: None)
    say(
        f"calibrating load 1: one executor, {WARMUP_BATCHES} warm-up + {MEASURED_BATCHES} full "
        "batches (cached afterwards)"
    )
    runner.start()
    rates: dict[int, float] = {}
    try:
        deadline = started + MEASURE_TIMEOUT_SECONDS
        client = runner.client
        told = started
        while time.monotonic() < deadline and len(rates) < MEASURED_BATCHES:
            if time.monotonic() - told >= PROGRESS_EVERY_SECONDS:
                told = time.monotonic()
                say(
                    f"calibrating: {len(rates)}/{MEASURED_BATCHES} batches measured, "
                    f"{told - started:.0f} s so far"
                )
            st = client.status()
            batch = st.last_committed_batch
            rate = true_rate([stage.model_dump() for stage in st.stages or []])
            if batch is not None and batch >= WARMUP_BATCHES and rate:
                rates[int(batch)] = rate
            time.sleep(0.5)
    finally:
        runner.stop(timeout=60)
    if len(rates) < MEASURED_BATCHES:
        raise CalibrationError(
            f"calibration of {job.metadata.name}: only {len(rates)} full batches in "
            f"{MEASURE_TIMEOUT_SECONDS:g} s (see {workdir / 'runner.log'})"
        )
    value = statistics.median(rates.values())
    log.info("calibrated", job=job.metadata.name, records_per_second=value, batches=len(rates))
    return value
