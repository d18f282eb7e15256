"""The test bed itself: real versions, Deployments that become Running pods on kwok nodes,
what .testbed/env promises, and the idempotency of up/down (on a private test bed)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.integration.k8s.k8s_tier import Tool, testbed_mod

pytestmark = pytest.mark.k8s


def test_components_report_the_pinned_versions(kubectl: Tool) -> None:
    want = testbed_mod.versions()["KUBERNETES_VERSION"]
    version = kubectl.json("version")
    assert version["serverVersion"]["gitVersion"] == want  # the ldflags took
    assert version["clientVersion"]["gitVersion"] == want


def test_env_file_names_every_service(testbed: testbed_mod.Testbed) -> None:
    env = dict(
        line.split("=", 1) for line in (testbed.dir / "env").read_text().splitlines() if line
    )
    assert env["KUBECONFIG"] == str(testbed.kubeconfig)
    for key in ("APISERVER", "ETCD", "CONTROLLER_MANAGER", "SCHEDULER", "KWOK"):
        assert env[f"TESTBED_{key}"].startswith(("http://127.0.0.1:", "https://127.0.0.1:")), key


def test_a_deployment_becomes_running_pods(kubectl: Tool, namespace: str) -> None:
    kubectl(
        "create",
        "deployment",
        "web",
        "--image=registry.invalid/web:1",
        "--replicas=3",
        "-n",
        namespace,
    )
    kubectl("rollout", "status", "deployment/web", "-n", namespace, "--timeout=60s")
    pods = kubectl.json("get", "pods", "-n", namespace)["items"]
    assert len(pods) == 3
    assert {p["status"]["phase"] for p in pods} == {"Running"}
    assert {p["spec"]["nodeName"] for p in pods} <= {"kwok-node-0", "kwok-node-1"}
    kubectl("scale", "deployment/web", "--replicas=1", "-n", namespace)
    kubectl(
        "wait",
        "--for=jsonpath={.status.replicas}=1",
        "deployment/web",
        "-n",
        namespace,
        "--timeout=60s",
    )


def test_nodes_keep_their_heartbeat(kubectl: Tool) -> None:
    leases = kubectl.json("get", "leases", "-n", "kube-node-lease")["items"]
    held = {le["metadata"]["name"]: le["spec"].get("renewTime") for le in leases}
    assert set(held) >= {"kwok-node-0", "kwok-node-1"}
    assert all(held[n] for n in ("kwok-node-0", "kwok-node-1"))


@pytest.mark.slow
def test_up_is_idempotent_and_down_stops_only_its_own(
    testbed: testbed_mod.Testbed, tmp_path: Path
) -> None:
    """A private test bed: a second up reuses everything; a killed API server is the only
    thing restarted; down stops exactly the recorded processes."""
    root = tmp_path / "bed"
    quiet = lambda _msg: None  # noqa: E731
    first = testbed_mod.ensure_up(root, log=quiet)
    try:
        assert first.started == list(testbed_mod.ORDER)
        assert testbed_mod.ensure_up(root, log=quiet).started == []
        state = json.loads((root / "state.json").read_text())
        os.kill(state["apiserver"]["pid"], signal.SIGKILL)
        again = testbed_mod.ensure_up(root, log=quiet)
        assert again.started == ["apiserver"]
        assert again.env["TESTBED_APISERVER"] == first.env["TESTBED_APISERVER"]
    finally:
        state = json.loads((root / "state.json").read_text())
        testbed_mod.down(root, log=quiet)
    for name in testbed_mod.ORDER:
        entry = state[name]
        assert not testbed_mod.is_ours(entry["pid"], entry["argv"]), f"{name} still runs"
    # The shared test bed was not touched.
    shared = json.loads((testbed.dir / "state.json").read_text())
    assert all(testbed_mod.is_ours(shared[n]["pid"], shared[n]["argv"]) for n in testbed_mod.ORDER)
