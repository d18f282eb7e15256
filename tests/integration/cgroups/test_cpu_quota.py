"""A CFS quota on real processes (what a pod's CPU limit is): a busy loop capped at a fifth of a
core gets a fifth of a core, its children stay capped, and nothing of ours is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from operators.query.cgroups import CGROUP_ROOT, PARENT, CpuQuota, CpuQuotaError
from tests.realcomponents import unavailable

BUSY = "import os, sys\nif sys.argv[1:] == ['fork']: os.fork()\nwhile True: pass\n"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@pytest.fixture
def quota() -> Iterator[CpuQuota]:
    try:
        q = CpuQuota.create(f"test-{os.getpid()}", 0.2)
    except CpuQuotaError as e:
        unavailable(f"no CPU quota here: {e}")
    yield q
    q.remove()


def test_a_busy_process_gets_its_quota_and_no_more(quota: CpuQuota) -> None:
    proc = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        quota.add(proc.pid)
        assert quota.pids() == [proc.pid]
        before, t0 = _cpu_seconds(proc.pid), time.monotonic()
        time.sleep(3.0)
        used = (_cpu_seconds(proc.pid) - before) / (time.monotonic() - t0)
    finally:
        proc.kill()
        proc.wait()
    # At most the quota (plus accounting slack); well above nothing even on a busy machine.
    assert 0.05 < used < 0.3, f"a 0.2-core quota gave {used:.2f} cores"
    throttled = quota.throttled_seconds()
    assert throttled is not None and throttled > 0, throttled


def test_children_forked_later_share_the_quota(quota: CpuQuota) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)\n" + BUSY, "fork"])
    try:
        quota.add(proc.pid)
        time.sleep(1.0)
        pids = quota.pids()
        assert len(pids) == 2 and proc.pid in pids, pids  # the fork was born inside
        before = sum(_cpu_seconds(p) for p in pids)
        t0 = time.monotonic()
        time.sleep(3.0)
        used = (sum(_cpu_seconds(p) for p in pids) - before) / (time.monotonic() - t0)
    finally:
        for p in quota.pids():
            os.kill(p, 9)
        proc.wait()
    assert used < 0.3, f"two busy processes under a 0.2-core quota used {used:.2f} cores"


def test_remove_moves_the_living_out_and_deletes_the_group(quota: CpuQuota) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        quota.add(proc.pid)
        quota.remove()
        assert not quota.path.exists()
        assert proc.poll() is None  # moved out, not killed
        quota.remove()  # idempotent
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("cpus", [0.0, -1.0, 10_000.0], ids=["zero", "negative", "too-many"])
def test_an_impossible_quota_is_refused_with_the_figure(cpus: float) -> None:
    with pytest.raises(CpuQuotaError, match=f"{cpus:g} cores"):
        CpuQuota.create("never", cpus)
    assert not (CGROUP_ROOT / "cpu" / PARENT / "never").exists()


def test_a_group_left_by_a_dead_owner_is_swept_by_the_next_create(quota: CpuQuota) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = quota.path.parent / f"cluster-{dead.pid}-abc-worker-0"
    left.mkdir()
    mine = quota.path.parent / f"cluster-{os.getpid()}-abc-worker-0"
    mine.mkdir()
    try:
        CpuQuota.create(f"probe-{os.getpid()}", 0.5).remove()
        assert not left.exists()
        assert mine.exists()  # its owner is alive: not ours to delete
    finally:
        for d in (left, mine):
            if d.exists():
                d.rmdir()
