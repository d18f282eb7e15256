"""Every metric the runner exports is documented in docs/runner.md (the README points there)."""

from __future__ import annotations

import re
from pathlib import Path

from contracts import metric_names

ROOT = Path(__file__).resolve().parents[2]


def test_every_exported_metric_is_documented() -> None:
    """Each metric of contracts.metric_names, by the name Prometheus shows (a counter's
    ``_total``; a summary's family name), in a docs/runner.md table row."""
    doc = (ROOT / "docs" / "runner.md").read_text()
    assert len(metric_names.ALL) > 20
    shown = {m: m.total if m.type == "counter" else m.full for m in metric_names.ALL}
    missing = sorted(name for name in shown.values()
                     if not re.search(rf"`{re.escape(name)}[`{{]", doc))
    assert missing == [], f"undocumented metrics: {missing}"


def test_the_docs_name_each_metric_with_its_type() -> None:
    """The docs/runner.md table row of a metric says the type the contract declares."""
    rows = {}
    for line in (ROOT / "docs" / "runner.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[1].startswith("`" + metric_names.PREFIX):
            name = cells[1].strip("`").split("{")[0].removeprefix(metric_names.PREFIX)
            name = name.removesuffix("_total")
            rows[name] = cells[2]
    wrong = {m.name: (rows.get(m.name), m.type) for m in metric_names.ALL
             if rows.get(m.name) != m.type}
    assert wrong == {}, f"docs/runner.md type differs from contracts.metric_names: {wrong}"
