"""``stream-autoscaler demo``: arguments -> run_demo, errors -> one clear line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from controller.core import TraceError


def run(args: argparse.Namespace) -> int:
    from controller.local.calibrate import CalibrationError
    from controller.local.demo import (
        DEFAULT_JOB,
        DEFAULT_POLICY,
        DEFAULT_TRACE,
        DemoError,
        run_demo,
    )
    from controller.local.prometheus_server import PrometheusNotFound
    from controller.manifests import ManifestError

    try:
        summary = run_demo(
            Path(args.job or DEFAULT_JOB),
            Path(args.policy or DEFAULT_POLICY),
            Path(args.trace or DEFAULT_TRACE),
            Path(args.out),
            args.duration,
            args.chaos,
        )
    except ManifestError as e:
        print("\n".join(e.problems), file=sys.stderr)
        return 2
    except (DemoError, TraceError, PrometheusNotFound, CalibrationError) as e:
        print(f"demo: {e}", file=sys.stderr)
        return 2
    keys = (
        "slo_violation_seconds", "max_lag_seconds", "executor_seconds", "scaling_actions",
        "repartitions", "direction_changes", "records_in", "exactly_once",
    )  # fmt: skip
    print(json.dumps({k: summary.get(k) for k in keys}, indent=2))
    print(f"written to {args.out}/ (summary.json, timeline.csv, timeline.png, report.html)")
    return 0 if summary.get("exactly_once") else 1
