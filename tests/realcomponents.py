"""How a test that needs a real component reacts when the component is missing.

Locally it skips, naming the command that installs the component; in CI (``CI=true``) it fails:
a missing Spark, API server, Prometheus or Kafka there is a broken build, not a pass.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
"""The one place ``CI`` is read by the tests (the shell scripts read it in hack/)."""
REPO = Path(__file__).resolve().parents[1]


def unavailable(reason: str) -> NoReturn:
    """Skip outside CI; fail in CI."""
    if IN_CI:
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def missing_spark() -> str | None:
    """Why Spark cannot run here (pyspark/pyarrow not importable, no Java), or None."""
    import shutil

    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as e:
        return f"pyspark/pyarrow not installed ({e})"
    java_home = os.environ.get("JAVA_HOME")
    if not shutil.which("java") and not (java_home and Path(java_home, "bin", "java").exists()):
        return "no Java (java on PATH or JAVA_HOME)"
    return None


def require_spark() -> None:
    """Skip (fail in CI) unless Spark can run."""
    problem = missing_spark()
    if problem is not None:
        unavailable(f"Spark needs {problem}")


def require_module(name: str) -> None:
    """At a test module's top, before importing ``name``: skip the module (fail in CI) when the
    package is not installed."""
    import importlib.util

    if importlib.util.find_spec(name) is None:
        if IN_CI:
            pytest.fail(f"CI=true and {name} is not installed (make setup)", pytrace=False)
        pytest.skip(f"{name} is not installed (make setup)", allow_module_level=True)
