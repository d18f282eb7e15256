"""Fixtures of the real-node tier: the test bed (the k8s tier's fixtures, same code as `make
testbed`) with its real node, and stream-autoscaler:dev built by hack/image/build.sh (cached:
seconds when nothing changed) and imported into the node's containerd.

Without the node (not root, containerd or the CNI plugins missing, tools not built) the tier is
skipped with the reason; in CI (CI=true) it fails.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.integration.k8s.conftest import (  # noqa: F401
    crds,
    helm,
    kubectl,
    namespace,
    testbed,
    tool_env,
)
from tests.integration.k8s.k8s_tier import REPO, Tool, testbed_mod, unavailable

IMAGE = "stream-autoscaler:dev"
BUILD = REPO / "hack" / "image" / "build.sh"


@dataclass(frozen=True)
class RealNode:
    name: str
    ip: str
    taint_key: str
    pod_cidr: str
    env: dict[str, str]

    def pod(self, name: str, *, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
        """A Pod manifest pinned to the real node (nodeSelector + the node's toleration)."""
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": self.name},
                "tolerations": [
                    {"key": self.taint_key, "operator": "Exists", "effect": "NoSchedule"}
                ],
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "containers": containers,
                **spec,
            },
        }


@pytest.fixture(scope="session")
def real_node(testbed: testbed_mod.Testbed) -> RealNode:  # noqa: F811
    if "TESTBED_NODE" not in testbed.env:
        unavailable(f"the test bed has no real node: {testbed.env.get('TESTBED_NODE_MISSING')}")
    taint = testbed.env["TESTBED_NODE_TAINT"]
    return RealNode(
        name=testbed.env["TESTBED_NODE"],
        ip=testbed.env["TESTBED_NODE_IP"],
        taint_key=taint.split("=", 1)[0],
        pod_cidr=testbed.env["TESTBED_POD_CIDR"],
        env=testbed.env,
    )


@pytest.fixture(scope="session")
def image(real_node: RealNode) -> str:
    """stream-autoscaler:dev, built (or found up to date) and in the node's containerd."""
    env = {**os.environ, "TESTBED_DIR": real_node.env["TESTBED_DIR"]}
    t0 = time.monotonic()
    proc = subprocess.run([str(BUILD), "build"], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(
            f"hack/image/build.sh failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
            f"{proc.stderr[-3000:]}",
            pytrace=False,
        )
    print(f"image ready in {time.monotonic() - t0:.1f} s:\n{proc.stdout}")
    return IMAGE


@pytest.fixture
def ns(namespace: str) -> str:  # noqa: F811
    return namespace


def run_pod(
    kubectl: Tool,  # noqa: F811
    ns: str,
    manifest: dict[str, Any],
    *,
    phase: str = "Succeeded",
    timeout: float = 120,
) -> tuple[dict[str, Any], str]:
    """Create the pod, wait until it reaches ``phase`` (or any final phase); (pod, its logs)."""
    import json

    kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(manifest))
    name = manifest["metadata"]["name"]
    deadline = time.monotonic() + timeout
    pod: dict[str, Any] = {}
    while time.monotonic() < deadline:
        pod = kubectl.json("get", "pod", name, "-n", ns)
        if pod["status"].get("phase") in ("Succeeded", "Failed") or (
            phase == "Running" and _ready(pod)
        ):
            break
        time.sleep(0.5)
    logs = kubectl("logs", name, "-n", ns, "--all-containers", check=False).stdout
    got = pod.get("status", {}).get("phase")
    if phase == "Running":
        assert _ready(pod), f"pod {name} not Ready: {pod.get('status')}\n{logs}"
    else:
        assert got == phase, f"pod {name} is {got}, expected {phase}: {pod.get('status')}\n{logs}"
    return pod, logs


def _ready(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in pod.get("status", {}).get("conditions", [])
    )


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="session")
def docker_env(image: str) -> Iterator[dict[str, str]]:
    """DOCKER_HOST of the dockerd hack/image/build.sh uses (for looking inside the image)."""
    out = subprocess.run(
        [str(BUILD), "env"], capture_output=True, text=True, check=True
    ).stdout.strip()
    key, _, value = out.partition("=")
    assert key == "DOCKER_HOST", out
    yield {**os.environ, "DOCKER_HOST": value}
