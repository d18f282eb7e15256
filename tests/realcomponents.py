"""How a test that needs a real component reacts when the component is missing.

Locally it skips, naming the command that installs the component; in CI (``CI=true``) it fails:
a missing Spark, API server, Prometheus or Kafka there is a broken build, not a pass.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(reason: str) -> NoReturn:
    """Skip outside CI; fail in CI."""
    if IN_CI:
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)
