"""``stream-autoscaler validate FILE...`` (StreamJobs and policies), ``policy validate FILE...``
and ``policy schema``.

Nothing here starts Spark or talks to a cluster: a dry run of what the runner, the controller and
the API server would refuse, with the same ``FILE: field.path (value) why`` lines.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from contracts.manifests import ManifestError, load_manifest, load_policy
from contracts.policy import ScalingPolicy
from contracts.streamjob import StreamJob


def run(args: argparse.Namespace) -> int:
    if args.policy_command == "schema":
        schema = ScalingPolicy.model_json_schema(by_alias=True)
        print(json.dumps(schema, indent=2, sort_keys=True))
        return 0
    return _check(args.files, load_policy)


def validate_files(args: argparse.Namespace) -> int:
    """``stream-autoscaler validate [--cluster] FILE...``: exit 0 when every file is valid, 1
    otherwise; ``--cluster`` checks a StreamJob as the API server does for one it runs in pods
    (its checkpoint shared by every pod)."""
    cluster = bool(getattr(args, "cluster", False))
    return _check(args.files, lambda path: load_manifest(path, cluster=cluster))


def _check(paths: list[str], load: Callable[[str], StreamJob | ScalingPolicy]) -> int:
    """Loads each file, printing ``FILE: ok (...)`` or its problems; 1 if any failed."""
    failed = 0
    for path in paths:
        try:
            doc = load(path)
        except ManifestError as e:
            failed += 1
            for line in e.problems:
                print(line, file=sys.stderr)
            continue
        print(f"{path}: ok ({summary(doc)})")
    return 1 if failed else 0


def summary(doc: StreamJob | ScalingPolicy) -> str:
    """One line saying what a valid manifest is."""
    if isinstance(doc, ScalingPolicy):
        spec = doc.spec
        return (
            f"ScalingPolicy {doc.metadata.name}: mode {spec.mode}, executors "
            f"{spec.executors.min}..{spec.executors.max}, lag SLO {spec.lag.slo_seconds:g} s"
        )
    job = doc.spec
    mode = f"attached to {job.attach.control_url}" if job.attach else "managed"
    if job.application is not None:
        app = job.application
        what = (
            f"script {app.script}" + (f" {' '.join(app.args)}" if app.args else "")
            if app.script
            else f"function {app.module}"
        )
        return f"StreamJob {doc.metadata.name}: {what}, {mode}, policy {job.policy_ref.name}"
    assert job.source is not None and job.sink is not None and job.pipeline is not None
    ops = ", ".join(op.name for op in job.pipeline)
    return (
        f"StreamJob {doc.metadata.name}: {job.source.type} -> [{ops}] -> {job.sink.type}, "
        f"{mode}, policy {job.policy_ref.name}"
    )
