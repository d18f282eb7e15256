"""``stream-autoscaler demo``: arguments -> run_demo, errors -> one clear line."""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
from pathlib import Path
from typing import Literal

from contracts.trace import Trace, TraceError, load_trace

COLUMNS = ("slo_violation_seconds", "max_lag_seconds", "executor_seconds", "scaling_actions",
           "repartitions", "exactly_once")  # fmt: skip


def static_baselines(trace: Trace, duration: float | None) -> list[tuple[str, int | None]]:
    """Static provisioning at the trace's mean and at its peak load (load 1 = one executor)."""
    from app.errors import DemoError

    if trace.unit != "load":
        raise DemoError("--baseline static needs a t,load trace (load 1 = one executor)")
    span = duration or trace.duration
    return [
        ("static-mean", max(1, math.ceil(trace.mean(span) - 1e-9))),
        ("static-peak", max(1, math.ceil(trace.peak(span) - 1e-9))),
    ]


def executor_cpus(value: str | None) -> float | Literal["job"] | None:
    """``--executor-cpu``: absent -> the job's own limit, ``none`` -> whole cores, else cores."""
    from app.errors import DemoError
    from contracts.spark import cpu_cores

    if value is None:
        return "job"
    if value.lower() == "none":
        return None
    try:
        cores = cpu_cores(value)
    except ValueError:
        cores = math.nan
    if not 0 < cores < math.inf:  # NaN fails too
        raise DemoError(f"--executor-cpu {value!r}: a number of cores (0.25, 250m) or 'none'")
    return cores


def _table(results: dict[str, dict[str, object]]) -> None:
    print(f"{'run':12}" + "".join(f"{c:>24}" for c in COLUMNS))
    for name, s in results.items():
        print(f"{name:12}" + "".join(f"{s.get(c)!s:>24}" for c in COLUMNS))


def run(args: argparse.Namespace) -> int:
    from app.calibrate import CalibrationError
    from app.demo import (
        DEFAULT_JOB,
        DEFAULT_TRACE,
        policy_for,
        run_demo,
    )
    from app.errors import DemoError
    from contracts.manifests import ManifestError
    from contracts.trace import MAX_SECONDS
    from controller.local.prometheus_server import PrometheusNotFound

    # SIGTERM (a CI timeout, a kill) unwinds like Ctrl-C, so every process we started is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    job = Path(args.job or DEFAULT_JOB)
    trace = Path(args.trace or DEFAULT_TRACE)
    out = Path(args.out)
    try:
        policy = Path(args.policy) if args.policy else policy_for(job)
        if args.duration is not None and not 0 < args.duration <= MAX_SECONDS:  # NaN fails both
            raise DemoError(
                f"--duration ({args.duration:g}) must be > 0 and at most {MAX_SECONDS:g} s"
            )
        cpus = executor_cpus(args.executor_cpu)
        runs: list[tuple[str, int | None]] = [("engine", None)]
        if args.baseline == "static":
            runs += static_baselines(load_trace(str(trace)), args.duration)
        elif args.baseline:
            raise DemoError(f"--baseline {args.baseline}: only 'static' runs beside real Spark")
        results = {}
        for name, executors in runs:
            where = out if len(runs) == 1 else out / name
            if len(runs) > 1:
                print(f"demo: run {name}" + (f" ({executors} executors)" if executors else ""))
            results[name] = run_demo(
                job, policy, trace, where, args.duration, args.chaos if name == "engine" else None,
                static_executors=executors, executor_cpus=cpus,
            )  # fmt: skip
    except ManifestError as e:
        print("\n".join(e.problems), file=sys.stderr)
        return 2
    except (DemoError, TraceError, PrometheusNotFound, CalibrationError) as e:
        print(f"demo: {e}", file=sys.stderr)
        return 2
    if len(results) > 1:
        (out / "comparison.json").write_text(json.dumps(results, indent=2) + "\n")
        _table(results)
    summary = results["engine"]
    keys = (
        "slo_violation_seconds", "max_lag_seconds", "executor_seconds", "scaling_actions",
        "repartitions", "direction_changes", "records_in", "exactly_once",
    )  # fmt: skip
    print(json.dumps({k: summary.get(k) for k in keys}, indent=2))
    from app.demo_report import graded

    for p in summary.get("scale_out_predictions", []):
        print(graded(p))
    print(f"written to {args.out}/ (summary.json, timeline.csv, timeline.png, report.html)")
    return 0 if summary.get("exactly_once") else 1
