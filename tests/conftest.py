"""Suite-wide: a machine-speed probe before the first test, and each tier's wall time, the
machine's CPU time over it and its budget, and the CPU by process kind over the run, printed at
the end of every run (tests/timing.py); the end of the node tier said to the other lane
(tests/lanes.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Generator

import pytest

from tests import lanes
from tests.timing import (
    STORY_PHASES,
    ProcessCpu,
    TierClock,
    machine_busy_seconds,
    session_probe,
    tier_of,
)

_CLOCK = TierClock()
_PROCESSES = ProcessCpu()
_stop_sampling: Callable[[], None] | None = None
_last_node_test: str | None = None


def pytest_sessionstart(session: pytest.Session) -> None:
    global _stop_sampling
    if _PROCESSES.proc.is_dir():
        _stop_sampling = _PROCESSES.run_in_background()


def pytest_collection_finish(session: pytest.Session) -> None:
    global _last_node_test
    _last_node_test = lanes.last_node_test([item.nodeid for item in session.items])


def pytest_runtest_logfinish(nodeid: str) -> None:
    if nodeid == _last_node_test:
        lanes.say_node_tier_done()


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _last_node_test is not None:  # stopped early (-x, a crash of a fixture): done all the same
        lanes.say_node_tier_done()


def pytest_report_header(config: pytest.Config) -> str:
    return (f"machine: {os.cpu_count()} cores, speed probe {session_probe():.3f} s "
            "(lower is faster; docs/benchmark.md gives the reference machine's)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    t0, busy0 = time.monotonic(), machine_busy_seconds()
    yield
    busy1 = machine_busy_seconds()
    cpu = None if busy0 is None or busy1 is None else busy1 - busy0
    _CLOCK.add(tier_of(item.nodeid), time.monotonic() - t0, cpu, item.nodeid)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _CLOCK.count(tier_of(report.nodeid))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _CLOCK.wall:
        return
    terminalreporter.section("slowest tests (wall, the machine's CPU share over it)")
    for line in _CLOCK.slowest():
        terminalreporter.write_line(line)
    if STORY_PHASES:
        terminalreporter.section("story phases (seconds on each story's clock)")
        for line in STORY_PHASES:
            terminalreporter.write_line(line)
    terminalreporter.section("time per tier")
    for line in _CLOCK.lines():
        terminalreporter.write_line(line)
    if _stop_sampling is not None:
        _stop_sampling()
        terminalreporter.section("CPU by process over the run (the whole machine)")
        for line in _PROCESSES.lines():
            terminalreporter.write_line(line)
