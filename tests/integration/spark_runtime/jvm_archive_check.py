"""Which class archive a local runner's JVMs map: read from ``/proc`` (their command lines, their
parents, their mapped files), for the runner tests (test_runner.py) on the tier's mini-cluster."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest


def _processes() -> dict[int, tuple[int, str]]:
    """Every process on the machine by PID: its parent's PID and its command line (arguments
    joined by spaces). One that ends while it is read is left out."""
    found: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state
        found[int(entry.name)] = (ppid, cmdline)
    return found


def _descendants(roots: list[int], procs: dict[int, tuple[int, str]]) -> dict[int, str]:
    """The processes below ``roots`` (not the roots), by PID: their command lines."""
    below: dict[int, str] = {}
    frontier = set(roots)
    while frontier:
        frontier = {pid for pid, (ppid, _) in procs.items() if ppid in frontier}
        below.update({pid: procs[pid][1] for pid in frontier})
    return below


def _maps(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` mapped (the JVM maps a class archive it accepted)."""
    return str(path) in Path(f"/proc/{pid}/maps").read_text(errors="replace")


def without_the_lanes_archive(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A runner's environment without the class archive the lanes hand every JVM through
    JAVA_TOOL_OPTIONS (hack/test.sh), and with no archive named: what maps it in the runner's
    JVMs is then the runner's own conf (operators/query/cluster.py::jvm_archive)."""
    from operators.query.cluster import JVM_ARCHIVE_ENV

    monkeypatch.delenv(JVM_ARCHIVE_ENV, raising=False)
    return {"JAVA_TOOL_OPTIONS": " ".join(
        o for o in os.environ.get("JAVA_TOOL_OPTIONS", "").split()
        if not o.startswith("-XX:SharedArchiveFile="))}


def assert_the_jvms_map_the_installs_archive(runner: Any, cluster: Any) -> None:
    """A local run (the demo, ``runner --master spark://``) gives its driver's and executors'
    JVMs the install's class archive (hack/jvm-archive/build.sh's), and the mini-cluster its
    master and workers: the runner's driver JVM maps it (its ``/proc/<pid>/maps``), each
    executor the cluster's workers run maps it and carries the flag from
    ``spark.executor.defaultJavaOptions`` on its command line, and each worker from
    ``SPARK_DAEMON_JAVA_OPTS``. Only this runner's and this cluster's processes are read: the
    other lane's JVMs start and end beside them."""
    from operators.query.cluster import INSTALL_JVM_ARCHIVE, jvm_archive
    from tests.realcomponents import unavailable

    archive = jvm_archive({})
    if archive is None:
        unavailable(f"no class archive at {INSTALL_JVM_ARCHIVE} newer than PySpark's jars "
                    "(hack/jvm-archive/build.sh)")
    flag = f"-XX:SharedArchiveFile={archive}"
    procs = _processes()
    drivers = [pid for pid, cmd in _descendants([runner.proc.pid], procs).items()
               if "org.apache.spark.deploy.SparkSubmit" in cmd]
    workers = [p.popen.pid for p in cluster._procs if p.name.startswith("worker")]
    executors = {pid: cmd for pid, cmd in _descendants(workers, procs).items()
                 if "CoarseGrainedExecutorBackend" in cmd}
    assert len(drivers) == 1 and executors, (drivers, executors)
    assert _maps(drivers[0], archive), f"the driver JVM did not map {archive}"
    checked = 0
    for pid, cmd in executors.items():
        assert flag in cmd, cmd
        try:
            mapped = _maps(pid, archive)
        except FileNotFoundError:  # an earlier test's executor that ended since: not this runner's
            continue
        assert mapped, f"executor {pid} did not map {archive}"
        checked += 1
    assert checked, executors
    assert all(flag in procs[pid][1] for pid in workers), [procs.get(p) for p in workers]
