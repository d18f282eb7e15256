"""Shared objects of the Kubernetes host's unit tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]

JOB: dict[str, Any] = {
    **yaml.safe_load((REPO / "k8s" / "samples" / "streamjob-burst.yaml").read_text()),
    "metadata": {"name": "wc", "namespace": "jobs", "uid": "1234-5678", "generation": 3},
}
"""The sample StreamJob as the API server returns it (uid, generation, namespace)."""
