"""Every metric the runner exports is documented in the README (docs/architecture.md)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_exported_metric_is_in_the_readme() -> None:
    source = (ROOT / "operators" / "exporter.py").read_text()
    names = set(re.findall(r'\b[gcs]\("([a-z_]+)"', source))
    assert len(names) > 20
    readme = (ROOT / "README.md").read_text()
    missing = sorted(n for n in names if f"stream_autoscaler_{n}" not in readme)
    assert missing == [], f"undocumented metrics: {missing}"
