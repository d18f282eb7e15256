"""A Spark driver's start with and without the lanes' JVM class archive, side by side.

    .venv/bin/python benchmarks/jvm_archive.py [--rounds 3]

Each round runs the archive's own warm-up workload (hack/jvm-archive/warmup.py: a burst source,
a keyed count in RocksDB state, a parquet sink, four 1 s batches) under ``spark-submit`` twice,
alternately without and with ``-XX:SharedArchiveFile`` (the lanes' flags otherwise: C1 only, the
serial collector), and prints the wall seconds and CPU seconds of each (the spark-submit tree:
launcher JVM, driver JVM, its Python) and their ratios. The workload's four batches take ~4 s of
either run's wall time whatever the JVM does, so the wall ratio understates the start's share.
Needs the archive (hack/jvm-archive/build.sh; `make test`'s prepare builds it).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("VENV", REPO / ".venv"))
ARCHIVE = VENV / "share" / "stream-autoscaler" / "spark-classes.jsa"
LANE_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""hack/test.sh's LANE_JAVA_OPTIONS without the archive."""


def one_run(archive: bool) -> tuple[float, float]:
    """(wall s, CPU s) of one warm-up under spark-submit."""
    flags = LANE_FLAGS + (f" -XX:SharedArchiveFile={ARCHIVE} -Xlog:cds*=off" if archive else "")
    env = {**os.environ, "JAVA_TOOL_OPTIONS": flags, "PYSPARK_PYTHON": str(VENV / "bin/python"),
           "PYSPARK_DRIVER_PYTHON": str(VENV / "bin/python"), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOCAL_HOSTNAME": "localhost"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run([str(VENV / "bin/spark-submit"), "--master", "local[2]",
                    "--conf", "spark.ui.enabled=false", "hack/jvm-archive/warmup.py"],
                   cwd=REPO, env=env, check=True, capture_output=True, timeout=300)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not ARCHIVE.is_file():
        print(f"no archive at {ARCHIVE}: run hack/jvm-archive/build.sh first", file=sys.stderr)
        return 2
    runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for r in range(args.rounds):
        for archive in (False, True):
            wall, cpu = one_run(archive)
            runs[archive].append((wall, cpu))
            print(f"round {r + 1} {'archive' if archive else 'jars   '}: "
                  f"{wall:6.2f} s wall {cpu:6.2f} s CPU", flush=True)
    base_wall = statistics.median(w for w, _ in runs[False])
    base_cpu = statistics.median(c for _, c in runs[False])
    wall = statistics.median(w for w, _ in runs[True])
    cpu = statistics.median(c for _, c in runs[True])
    print(f"median  jars {base_wall:.2f} s wall {base_cpu:.2f} s CPU | archive {wall:.2f} s wall "
          f"{cpu:.2f} s CPU | ratio wall {wall / base_wall:.2f} CPU {cpu / base_cpu:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
