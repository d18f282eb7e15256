"""What `make kind-burst` applies (app/kind_burst.py): the burst StreamJob, its ScalingPolicy,
and the ReadWriteMany volume over the host directory every kind worker mounts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

JOB = "kind-burst"
POLICY = "kind-burst"
CLAIM = "stream-autoscaler-checkpoints"
NAMESPACE = "default"
SHARED_PATH = "/var/lib/stream-autoscaler/shared"
"""Where every worker mounts the shared host directory (hack/kind/lib.sh KIND_SHARED_PATH)."""
RUNNER_UID = 10001
"""The image's user (the chart's podSecurityContext): it must write the host directory."""

TRACE = "t,input_rate\n0,1500\n20,40000\n65,400\n180,12000\n260,400\n4000,0\n100000,0\n"
"""Records/s by second since the query started: a 45 s burst that one 0.5-CPU executor cannot
keep up with (~30,000 records/s on this machine's fastest day; the engine's first action comes
~25 s into it, the controller's kill in that action, and the lost worker after it, while the
backlog of 1-2 million records drains), a lull long enough for a scale-in (the policy's 30 s
stabilization and 16 s cooldown), a smaller burst, then a light tail (400/s) past
any run's end (:data:`app.kind_burst.MAX_WAIT_SECONDS`, stretched up to 3x by the kind tier on a
slow machine: ``tests.timing.bound``): a recovery that comes after the bursts
always has records to commit a batch of (with none arriving, no batch follows a restart and
"the first commit after the recovery" never comes: seen in CI when a loaded machine put the lost
driver's node past the end of the bursts)."""

BURSTS_SECONDS = 330.0
"""When the trace's bursts are over; the run ends once this has passed and the job has caught
up (and scaled in)."""

SLO_SECONDS = 20.0
EXECUTORS = {
    "initial": 1,
    "cores": 1,
    "memory": "512m",
    "cpu": "400m",
    "cpuLimit": "500m",
    "memoryOverhead": "384m",
}


def policy_doc() -> dict[str, Any]:
    """At most 4 executors (what two workers on this machine hold beside the driver and the
    controller), repartition allowed, a 20 s lag SLO, short windows so the run fits in minutes."""
    return {
        "apiVersion": "stream-autoscaler.io/v1alpha1",
        "kind": "ScalingPolicy",
        "metadata": {"name": POLICY, "namespace": NAMESPACE},
        "spec": {
            "mode": "enforce",
            "executors": {"min": 1, "max": 4},
            "partitions": {
                "min": 1,
                "max": 8,
                "repartition": True,
                "perSlot": 1,
                "maxDowntimeSeconds": 120,
            },
            "utilization": {"target": 0.6, "low": 0.3, "high": 0.85},
            "lag": {"sloSeconds": SLO_SECONDS, "catchUpSeconds": 40},
            "timing": {
                "evaluationIntervalSeconds": 4,
                "windowSeconds": 16,
                "staleAfterSeconds": 40,
                "cooldownSeconds": 16,
                "scaleDownStabilizationSeconds": 30,
            },
        },
    }


def job_doc(root: str) -> dict[str, Any]:
    """The burst StreamJob with everything under ``root`` (the volume's mount path in the pods,
    or the host directory for the verifier)."""
    return {
        "apiVersion": "stream-autoscaler.io/v1alpha1",
        "kind": "StreamJob",
        "metadata": {"name": JOB, "namespace": NAMESPACE},
        "spec": {
            "policyRef": {"name": POLICY},
            "source": {
                "type": "burst",
                "trace": f"{root}/{JOB}/trace.csv",
                "keys": 20000,
                "partitions": 4,
                "maxRecordsPerBatch": 200_000,
            },
            "pipeline": [
                {
                    "type": "aggregate",
                    "name": "count-by-key",
                    "keys": ["key"],
                    "aggregations": [
                        {"fn": "count"},
                        {"fn": "sum", "column": "value", "as": "total"},
                    ],
                }
            ],
            "sink": {"type": "files", "path": f"{root}/{JOB}/out"},
            "trigger": {"intervalSeconds": 2},
            "checkpoint": {
                "location": f"{root}/{JOB}/checkpoint",
                "volume": {"claimName": CLAIM, "mountPath": SHARED_PATH},
            },
            "statePartitions": 2,
            "executors": EXECUTORS,
        },
    }


VOLUME_MANIFEST = Path(__file__).resolve().parent.parent / "k8s/storage/checkpoint-volume-kind.yaml"
"""The PersistentVolume over the shared directory and the claim bound to it (hack/kind/burst.sh
applies the same file)."""


def volume_docs() -> list[dict[str, Any]]:
    """The host directory as a ReadWriteMany volume, pre-bound to the claim the jobs name."""
    return [d for d in yaml.safe_load_all(VOLUME_MANIFEST.read_text()) if d]
