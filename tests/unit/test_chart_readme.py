"""The chart README's values table is in step with values.yaml and values.schema.json: every
value a user can set is documented, and the schema knows every value the file has."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

CHART = Path(__file__).resolve().parents[2] / "helm" / "stream-autoscaler"
OPAQUE = {"podSecurityContext", "securityContext", "resources", "policies"}
"""Values passed through as Kubernetes objects (or, for policies, one ScalingPolicy spec per
name): documented as a whole, not key by key."""


def _rows() -> list[str]:
    text = (CHART / "README.md").read_text(encoding="utf-8")
    return [line.split("|")[1] for line in text.splitlines() if line.startswith("| `")]


def _documented(key: str, rows: list[str], parent: str | None = None) -> bool:
    if parent is None:
        return any(re.search(rf"`{re.escape(key)}[`.]", r) for r in rows)
    return any(f"`{parent}." in r and re.search(rf"\b{re.escape(key)}\b", r) for r in rows)


def test_every_value_is_in_the_readme_table() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    rows = _rows()
    missing = [k for k in values if not _documented(k, rows)]
    for k, v in values.items():
        if isinstance(v, dict) and k not in OPAQUE:
            missing += [f"{k}.{c}" for c in v if not _documented(c, rows, k)]
    assert missing == [], f"values without a row in {CHART / 'README.md'}: {missing}"


def test_the_schema_knows_every_value() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    props = schema["properties"]
    missing = [k for k in values if k not in props]
    for k, v in values.items():
        sub = props.get(k, {}).get("properties")
        if isinstance(v, dict) and sub is not None and k not in OPAQUE:
            missing += [f"{k}.{c}" for c in v if c not in sub]
    assert missing == [], f"values not in values.schema.json: {missing}"
