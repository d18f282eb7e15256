"""``stream-autoscaler simulate``: the decision engine (and baselines) against a job model.

Writes ``DIR/summary.json``, ``DIR/timeline.csv`` and ``DIR/timeline.png`` for our engine; with
``--baseline`` also ``DIR/comparison.json`` (``{name: summary}``) and each baseline's summary and
timeline under ``DIR/baselines/NAME/``. Errors are one line per problem, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from contracts import manifests
from contracts.chaos import ChaosError
from contracts.policy import ScalingPolicySpec
from contracts.trace import MAX_SECONDS, TraceError, load_trace
from controller.errors import SimulatorInputError
from controller.simulator.compare import compare, expand
from controller.simulator.loop import parse_chaos
from controller.simulator.model import ModelError, load_model
from controller.simulator.report import plot_timeline, table, write_json, write_timeline

DEFAULT_POLICY = "policies/default.yaml"


class PolicyError(SimulatorInputError):
    """A policy file that cannot be used."""


def load_policy(path: str | None) -> ScalingPolicySpec:
    """The ScalingPolicy spec from ``path``, else policies/default.yaml, else the defaults."""
    if path is None:
        for cand in (Path(DEFAULT_POLICY), Path(__file__).resolve().parents[2] / DEFAULT_POLICY):
            if cand.is_file():
                path = str(cand)
                break
        else:
            return ScalingPolicySpec()
    try:
        return manifests.load_policy(path).spec
    except manifests.ManifestError as e:
        raise PolicyError("\n".join(e.problems)) from None


def run(args: argparse.Namespace) -> int:
    """Entry point of the ``simulate`` subcommand; returns the exit code."""
    try:
        trace = load_trace(args.trace)
        policy = load_policy(getattr(args, "policy", None))
        model = load_model(getattr(args, "model", None))
        chaos = parse_chaos(getattr(args, "chaos", None))
        names = expand(getattr(args, "baseline", None))
    except (TraceError, PolicyError, ModelError, ChaosError, ValueError) as e:
        print(f"simulate: {e}", file=sys.stderr)
        return 2
    duration = getattr(args, "duration", None)
    if duration is not None and not 0 < duration <= MAX_SECONDS:  # NaN fails both
        print(f"simulate: --duration ({duration:g}) must be > 0 and at most {MAX_SECONDS:g} s "
              "(a week: the simulator steps through every second)", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cmp = compare(trace, model, policy, names, duration=duration, chaos=chaos)
    slo = policy.lag.slo_seconds
    write_json(out / "summary.json", cmp.summaries["engine"])
    write_timeline(out / "timeline.csv", cmp.runs["engine"])
    plot_timeline(out / "timeline.png", cmp.runs["engine"], slo, f"engine on {args.trace}")
    if len(names) > 1:
        write_json(out / "comparison.json", cmp.summaries)
        for name, res in cmp.runs.items():
            if name == "engine":
                continue
            d = out / "baselines" / name
            d.mkdir(parents=True, exist_ok=True)
            write_json(d / "summary.json", cmp.summaries[name])
            write_timeline(d / "timeline.csv", res)
            plot_timeline(d / "timeline.png", res, slo, f"{name} on {args.trace}")
    if not getattr(args, "quiet", False):
        print(table(list(cmp.summaries.values())))
        print(
            f"\nwritten to {out}/ (summary.json, timeline.csv, timeline.png"
            + (", comparison.json)" if len(names) > 1 else ")")
        )
    return 0
