"""What an executor's Python worker pays to import the burst reader, this tree against a baseline.

    .venv/bin/python benchmarks/worker_imports.py [--baseline REF] [--rounds 9]

A Python worker reading the burst source (a PySpark data source) unpickles the reader, which
imports :mod:`operators.sources.burst_datasource` and with it the package's ``__init__``; the
worker has by then imported ``pyspark.worker`` (Spark's daemon forks it with that loaded). Each
round starts a fresh interpreter per tree, imports ``pyspark.worker``, then times the reader's
import alone (process CPU time and wall time), alternating the trees; the figures are each
tree's median and their ratio. The baseline (default ``HEAD``) is checked out into a temporary
git worktree; both trees run on this venv's interpreter and packages. On an executor capped at
half a core the wall time of the same import is about twice its CPU time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROBE = (
    "import json, time, pyspark.worker\n"
    "c, w = time.process_time(), time.perf_counter()\n"
    "import operators.sources.burst_datasource\n"
    "print(json.dumps([time.process_time() - c, time.perf_counter() - w]))\n"
)
"""Run with the tree as the working directory: ``-c`` puts it first on ``sys.path``."""


def one_import(tree: Path) -> tuple[float, float]:
    """(CPU s, wall s) of the reader's import in a fresh interpreter on ``tree``."""
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=tree, capture_output=True,
                          text=True, check=True, timeout=120)
    cpu, wall = json.loads(done.stdout.strip().splitlines()[-1])
    return cpu, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default="HEAD", help="git ref to compare with (HEAD)")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="worker-imports-") as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(base),
                        args.baseline], check=True)
        try:
            runs: dict[str, list[tuple[float, float]]] = {"baseline": [], "current": []}
            for _ in range(args.rounds):
                runs["baseline"].append(one_import(base))
                runs["current"].append(one_import(REPO))
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)],
                           check=False)
    med = {k: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v))
           for k, v in runs.items()}
    print(f"the burst reader's import in a Python worker, median of {args.rounds} "
          f"(baseline {args.baseline}):")
    print(f"{'tree':<10} {'CPU s':>7} {'wall s':>7}")
    for name, (cpu, wall) in med.items():
        print(f"{name:<10} {cpu:7.3f} {wall:7.3f}")
    (bc, bw), (cc, cw) = med["baseline"], med["current"]
    print(f"{'ratio':<10} {cc / bc:7.2f} {cw / bw:7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
