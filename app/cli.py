"""The ``stream-autoscaler`` command.

Each subcommand lives with the part it drives; this module only wires arguments to them, so
importing it stays cheap (no pyspark, no kubernetes until a subcommand needs them).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

Handler = Callable[[argparse.Namespace], int]


def _policy(args: argparse.Namespace) -> int:
    from app import policy_cli

    return policy_cli.run(args)


def _validate(args: argparse.Namespace) -> int:
    from app import policy_cli

    return policy_cli.validate_files(args)


def _simulate(args: argparse.Namespace) -> int:
    from controller.simulator import cli as sim_cli

    return sim_cli.run(args)


def _demo(args: argparse.Namespace) -> int:
    from app import demo_cli

    return demo_cli.run(args)


def _runner(args: argparse.Namespace) -> int:
    from operators.driver import cli as op_cli

    return op_cli.runner_main(args.rest)


def _controller(args: argparse.Namespace) -> int:
    from controller.kube import main as kube_main

    return kube_main.main(args)


def _checkpoint(args: argparse.Namespace) -> int:
    from operators.driver import cli as op_cli

    return op_cli.checkpoint_main(args.rest)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stream-autoscaler",
        description="Elastic autoscaling for Spark Structured Streaming.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser(
        "demo", help="the embedded closed loop: real Spark, a burst, the controller, a report"
    )
    demo.add_argument(
        "--job", help="StreamJob manifest (default: k8s/samples/pseudonymized-wordcount.yaml)"
    )
    demo.add_argument(
        "--policy", help="ScalingPolicy YAML (default: policies/<the job's policyRef>.yaml)"
    )
    demo.add_argument("--trace", help="trace CSV (default: traces/demo.csv)")
    demo.add_argument("--duration", type=float, help="seconds to run (default: trace end)")
    demo.add_argument(
        "--chaos", help="kill-driver@T, kill-executor@T, kill-prometheus@T (comma-separated)"
    )
    demo.add_argument(
        "--baseline", help="static: also run static provisioning at the trace's mean and peak"
    )
    demo.add_argument(
        "--executor-cpu",
        metavar="CORES",
        help="cap each executor at CORES (a CFS quota, as a pod's CPU limit; e.g. 0.25), or "
        "'none' for whole cores (default: the job's executors.cpuLimit or cpu)",
    )
    demo.add_argument("--out", required=True, help="output directory")
    demo.set_defaults(handler=_demo)

    sim = sub.add_parser("simulate", help="run the decision engine against a model of a job")
    sim.add_argument("--trace", required=True, help="trace CSV (t,input_rate or t,load)")
    sim.add_argument("--policy", help="ScalingPolicy YAML (default: policies/default.yaml)")
    sim.add_argument("--model", help="job model YAML (default: the reference pipeline)")
    sim.add_argument(
        "--baseline",
        help="also run a baseline: static, hpa, dstream, flink, oracle, or all",
    )
    sim.add_argument("--duration", type=float, help="seconds to simulate (default: trace end)")
    sim.add_argument("--chaos", help="e.g. kill-driver@120 (a driver failure at t=120 s)")
    sim.add_argument("--out", required=True, help="output directory")
    sim.add_argument("--quiet", action="store_true", help="no table on stdout")
    sim.set_defaults(handler=_simulate)

    val_all = sub.add_parser(
        "validate", help="check StreamJob and ScalingPolicy files (a dry run: nothing starts)"
    )
    val_all.add_argument("files", nargs="+", metavar="FILE")
    val_all.add_argument(
        "--cluster", action="store_true",
        help="check StreamJobs as the API server does for jobs run in pods (managed: the "
             "checkpoint on a shared claim)")
    val_all.set_defaults(handler=_validate)

    pol = sub.add_parser("policy", help="validate policies or print their JSON Schema")
    psub = pol.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    val = psub.add_parser("validate", help="check ScalingPolicy files")
    val.add_argument("files", nargs="+", metavar="FILE")
    psub.add_parser("schema", help="print the ScalingPolicy JSON Schema")
    pol.set_defaults(handler=_policy)

    ctl = sub.add_parser("controller", help="the Kubernetes controller (StreamJobs)")
    from controller.kube.main import add_arguments

    add_arguments(ctl)
    ctl.set_defaults(handler=_controller)

    for name, handler, text in (
        ("runner", _runner, "run one streaming job with its metrics and control endpoints"),
        ("checkpoint", _checkpoint, "inspect, back up, restore or repartition a checkpoint"),
    ):
        sp = sub.add_parser(name, help=text, add_help=False)
        sp.add_argument("rest", nargs=argparse.REMAINDER)
        sp.set_defaults(handler=handler)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        if not hasattr(args, "rest"):
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        args.rest = [*unknown, *args.rest]
    handler: Handler = args.handler
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
