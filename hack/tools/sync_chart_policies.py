#!/usr/bin/env python3
"""Copy the repo's policies/*.yaml specs into the chart's values.yaml `policies:` map (Helm
cannot read files outside the chart). Comments come along. tests/integration/k8s/test_helm.py
fails when the two differ; run this to fix it:

    python3 hack/tools/sync_chart_policies.py
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VALUES = REPO / "helm" / "stream-autoscaler" / "values.yaml"
ORDER = ("default", "latency-first", "cost-saver")  # the rest follow, sorted


def block() -> str:
    files = sorted(
        REPO.glob("policies/*.yaml"),
        key=lambda p: (ORDER.index(p.stem) if p.stem in ORDER else len(ORDER), p.stem),
    )
    out = ["policies:"]
    for f in files:
        lines = f.read_text().splitlines()
        name = next(ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("  name:"))
        spec = lines.index("spec:")
        out.append(f"  {name}:")
        out += [f"  {ln}" if ln.strip() else "" for ln in lines[spec + 1 :]]
    return "\n".join(out) + "\n"


def main() -> int:
    text = VALUES.read_text()
    start = text.index("\npolicies:\n") + 1  # the map is the last key of values.yaml
    new = text[:start] + block()
    if new != text:
        VALUES.write_text(new)
        print(f"updated {VALUES.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
