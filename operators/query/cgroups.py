"""CPU quotas for processes we start: what a Kubernetes CPU limit is, on one machine.

Usage::

    quota = CpuQuota.create("demo-1234-worker-0", cpus=0.25)   # CpuQuotaError if not allowed
    quota.add(worker_pid)        # the worker and every executor it forks later are capped
    ...
    quota.remove()               # processes still inside go back to the root group

A pod's ``limits.cpu: 250m`` becomes a CFS quota of 25 ms per 100 ms period on the container's
cgroup (cAdvisor shows ``cpu.cfs_quota_us = 25000``); this module writes the same two numbers
for a group of host processes: cgroup v1's ``cpu`` controller (``cpu.cfs_quota_us``,
``cpu.cfs_period_us``) or cgroup v2's ``cpu.max``. No burst allowance, as Kubernetes sets none.
It needs write access to the cgroup hierarchy (root, or a delegated subtree); without it
:meth:`CpuQuota.create` raises :class:`CpuQuotaError` saying why, and callers fall back to
whole cores.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from operators.errors import OperatorsError

CGROUP_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000
"""The CFS period Kubernetes uses (kubelet's default ``cpuCFSQuotaPeriod``, 100 ms)."""
MIN_CPUS = 0.01
"""The smallest quota accepted: 1 ms per period (the kernel's floor), i.e. Kubernetes' ``10m``."""
PARENT = "stream-autoscaler"
"""The group under which every quota of ours lives (one place to look, one to clean)."""


class CpuQuotaError(OperatorsError, RuntimeError):
    """A CPU quota could not be set up here (no permission, no cpu controller, bad value)."""


def _hierarchy() -> tuple[str, Path]:
    """("v1", the cpu controller's mount) or ("v2", the unified root)."""
    v1 = CGROUP_ROOT / "cpu"
    if (v1 / "cpu.cfs_quota_us").exists():
        return "v1", v1
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return "v2", CGROUP_ROOT
    raise CpuQuotaError(
        f"no cgroup cpu controller at {CGROUP_ROOT} (neither v1 cpu/cpu.cfs_quota_us nor v2 "
        "cgroup.controllers)"
    )


def _sweep(parent: Path) -> None:
    """Deletes empty groups of ours whose owner (the pid in ``kind-PID-...``) is gone: what a
    SIGKILLed demo left behind."""
    for group in parent.iterdir():
        m = _OWNER.match(group.name)
        if not group.is_dir() or m is None or Path(f"/proc/{m.group(1)}").exists():
            continue
        with contextlib.suppress(OSError):  # still has processes, or already gone
            group.rmdir()


_OWNER = re.compile(r"^[a-z]+-(\d+)(?:-|$)")
"""Our group names start with a kind and the pid of the process that made them."""


@dataclass
class CpuQuota:
    """One cgroup with a CFS quota of ``cpus`` cores."""

    path: Path
    cpus: float
    version: str

    @classmethod
    def create(cls, name: str, cpus: float) -> CpuQuota:
        """Makes (or reuses) ``stream-autoscaler/<name>`` with a quota of ``cpus`` cores.

        ``name`` is ``kind-PID[-more]`` with the pid of the process that owns it, so a group
        left by a killed owner is deleted by the next ``create``."""
        if not MIN_CPUS <= cpus <= (os.cpu_count() or 1):
            raise CpuQuotaError(
                f"a CPU quota of {cpus:g} cores: must be between {MIN_CPUS:g} and the "
                f"{os.cpu_count()} cores of this machine"
            )
        if "/" in name or name in ("", ".", ".."):
            raise CpuQuotaError(f"cgroup name {name!r}: one path component expected")
        version, root = _hierarchy()
        parent = root / PARENT
        path = parent / name
        try:
            parent.mkdir(exist_ok=True)
            if version == "v2":
                # Children get the cpu controller only if every ancestor delegates it.
                for d in (root, parent):
                    (d / "cgroup.subtree_control").write_text("+cpu")
            _sweep(parent)
            path.mkdir(exist_ok=True)
            quota_us = max(1000, round(cpus * PERIOD_US))
            if version == "v1":
                (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (path / "cpu.cfs_quota_us").write_text(str(quota_us))
            else:
                (path / "cpu.max").write_text(f"{quota_us} {PERIOD_US}")
        except OSError as e:
            raise CpuQuotaError(
                f"cannot set a CPU quota in {path} ({e.strerror or e}): run as root or give "
                "this user a delegated cgroup"
            ) from None
        return cls(path=path, cpus=cpus, version=version)

    def add(self, pid: int) -> None:
        """Moves process ``pid`` (all its threads) into the group; its later children stay in."""
        try:
            (self.path / "cgroup.procs").write_text(str(pid))
        except OSError as e:
            raise CpuQuotaError(
                f"cannot move pid {pid} into {self.path}: {e.strerror or e}"
            ) from None

    def pids(self) -> list[int]:
        """Processes in the group now."""
        try:
            text = (self.path / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(x) for x in text.split()]

    def throttled_seconds(self) -> float | None:
        """Time the group's tasks waited for quota (``cpu.stat``), as cAdvisor's
        ``container_cpu_cfs_throttled_seconds_total``; None if unreadable."""
        try:
            stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
        except (OSError, ValueError):
            return None
        if "throttled_time" in stat:  # v1: nanoseconds
            return int(stat["throttled_time"]) / 1e9
        if "throttled_usec" in stat:  # v2: microseconds
            return int(stat["throttled_usec"]) / 1e6
        return None

    def remove(self) -> None:
        """Moves what is left to the root group and deletes the group. Idempotent."""
        root = self.path.parent.parent
        for pid in self.pids():
            with contextlib.suppress(OSError):  # it exited meanwhile
                (root / "cgroup.procs").write_text(str(pid))
        with contextlib.suppress(OSError):
            self.path.rmdir()
        with contextlib.suppress(OSError):  # only when no other quota of ours is left
            self.path.parent.rmdir()
