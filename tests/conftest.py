"""Suite-wide: each tier's wall time, printed at the end of every run.

A tier is a folder under tests/ (``unit``, ``integration/<component>``, ``e2e``); its time is the
sum of its tests' setup, call and teardown, so a slow fixture shows against the tier that pays it.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

_TIER_SECONDS: dict[str, float] = defaultdict(float)
_TIER_TESTS: dict[str, int] = defaultdict(int)


def _tier(nodeid: str) -> str:
    parts = Path(nodeid.split("::")[0]).parts
    if len(parts) > 2 and parts[1] == "integration":
        return "/".join(parts[1:3])
    return parts[1] if len(parts) > 1 else parts[0]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    tier = _tier(report.nodeid)
    _TIER_SECONDS[tier] += report.duration
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _TIER_TESTS[tier] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _TIER_SECONDS:
        return
    terminalreporter.section("time per tier")
    for tier, secs in sorted(_TIER_SECONDS.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{tier:32} {_TIER_TESTS[tier]:4d} tests {secs:8.1f} s")
    terminalreporter.write_line(f"{'total':32} {sum(_TIER_TESTS.values()):4d} tests "
                                f"{sum(_TIER_SECONDS.values()):8.1f} s")
