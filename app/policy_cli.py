"""``stream-autoscaler policy validate FILE...`` and ``policy schema``."""

from __future__ import annotations

import argparse
import json
import sys

from contracts.manifests import ManifestError, load_policy
from contracts.policy import ScalingPolicy


def run(args: argparse.Namespace) -> int:
    if args.policy_command == "schema":
        schema = ScalingPolicy.model_json_schema(by_alias=True)
        print(json.dumps(schema, indent=2, sort_keys=True))
        return 0
    failed = 0
    for path in args.files:
        try:
            policy = load_policy(path)
        except ManifestError as e:
            failed += 1
            for line in e.problems:
                print(line, file=sys.stderr)
            continue
        spec = policy.spec
        print(
            f"{path}: ok ({policy.metadata.name}: mode {spec.mode}, executors "
            f"{spec.executors.min}..{spec.executors.max}, lag SLO {spec.lag.slo_seconds:g} s)"
        )
    return 1 if failed else 0
