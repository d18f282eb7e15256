"""Fixtures of the Kubernetes tier: the loopback test bed (the same code as `make testbed`),
kubectl and helm bound to it, the CRDs installed, and a throwaway namespace per test.

Without the built tools the tier is skipped with the command that builds them — except in CI
(CI=true), where a test bed that cannot start fails the run.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.integration.k8s.k8s_tier import CRD_DIR, REPO, Tool, testbed_mod, unavailable


@pytest.fixture(scope="session")
def testbed() -> Iterator[testbed_mod.Testbed]:
    try:
        testbed_mod.tool_paths()
    except testbed_mod.ToolsMissing as e:
        unavailable(f"{e}")
    try:
        bed = testbed_mod.ensure_up(user=os.getpid())
    except Exception as e:  # a broken test bed is a failure wherever it happens
        pytest.fail(f"the test bed did not start: {e}", pytrace=False)
    yield bed
    # The last session out stops it, unless `make testbed` pinned it (or TESTBED_KEEP is set).
    if not os.environ.get("TESTBED_KEEP"):
        testbed_mod.release(os.getpid())


@pytest.fixture(scope="session")
def tool_env(testbed: testbed_mod.Testbed) -> dict[str, str]:
    env = {**os.environ, **testbed.env}
    env["PATH"] = f"{testbed.env['TESTBED_BIN']}:{env.get('PATH', '')}"
    env["HELM_CACHE_HOME"] = str(testbed.dir / "helm" / "cache")
    env["HELM_CONFIG_HOME"] = str(testbed.dir / "helm" / "config")
    env["HELM_DATA_HOME"] = str(testbed.dir / "helm" / "data")
    return env


@pytest.fixture(scope="session")
def kubectl(testbed: testbed_mod.Testbed, tool_env: dict[str, str]) -> Tool:
    return Tool(testbed.tools["kubectl"], tool_env)


@pytest.fixture(scope="session")
def helm(testbed: testbed_mod.Testbed, tool_env: dict[str, str]) -> Tool:
    return Tool(testbed.tools["helm"], tool_env)


@pytest.fixture(scope="session")
def helm_offline() -> Tool:
    """helm for commands that need no cluster (lint, template): only the built binary."""
    try:
        paths = testbed_mod.tool_paths()
    except testbed_mod.ToolsMissing as e:
        unavailable(f"{e}")
    home = REPO / ".testbed" / "helm"
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    return Tool(paths["helm"], env)


@pytest.fixture(scope="session")
def crds(kubectl: Tool) -> list[str]:
    """Apply k8s/crds/*.yaml and wait until the API server serves them; their names."""
    files = sorted(CRD_DIR.glob("*.yaml"))
    if not files:
        pytest.fail(
            "k8s/crds/*.yaml are missing: generate them with `.venv/bin/python -m contracts.crds`",
            pytrace=False,
        )
    names = []
    for f in files:
        kubectl("apply", "--server-side", "--force-conflicts", "-f", str(f))
        for doc in yaml.safe_load_all(f.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                names.append(doc["metadata"]["name"])
    kubectl("wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{n}" for n in names])
    return names


@pytest.fixture
def namespace(kubectl: Tool) -> Iterator[str]:
    """A fresh namespace (with its default ServiceAccount), deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    kubectl("create", "namespace", name)
    kubectl("wait", "--for=create", "--timeout=60s", "-n", name, "serviceaccount/default")
    yield name
    # No controller runs after a test to honour our finalizer: release the jobs, or the
    # namespace would stay Terminating for ever.
    jobs = kubectl("get", "streamjobs", "-n", name, "-o", "name", check=False).stdout.split()
    for job in jobs:
        kubectl("patch", job, "-n", name, "--type=merge", "-p",
                '{"metadata": {"finalizers": null}}', check=False)
    kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def controller_kubeconfig(
    helm: Tool, kubectl: Tool, crds: list[str], tool_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Path]:
    """The chart installed (RBAC, ServiceAccount; no controller pod) and a kubeconfig with that
    ServiceAccount's token: the controller runs in tests exactly as privileged as in a cluster.
    Per module: the chart's cluster-scoped names are also test_helm's and test_rbac's."""
    from tests.integration.k8s.controller_env import CONTROLLER_NS, RELEASE, install_chart

    path = install_chart(helm, kubectl, tmp_path_factory.mktemp("ctl"), tool_env)
    who = kubectl(f"--kubeconfig={path}", "auth", "whoami", "-o",
                  "jsonpath={.status.userInfo.username}").stdout
    assert who == f"system:serviceaccount:{CONTROLLER_NS}:{RELEASE}", who
    yield path
    helm("uninstall", RELEASE, "-n", CONTROLLER_NS, "--wait", check=False)
