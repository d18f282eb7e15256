"""The suite's time table: tiers named by folder, CPU share per tier, budgets named when passed."""

from __future__ import annotations

import os
from pathlib import Path

from tests.timing import (
    SUITE_BUDGET_SECONDS,
    TIER_BUDGET_SECONDS,
    TierClock,
    machine_busy_seconds,
    tier_of,
)


def test_a_tier_is_the_folder_under_tests_or_under_integration() -> None:
    assert tier_of("tests/unit/core/test_engine.py::test_x") == "unit"
    assert tier_of("tests/integration/k8s/test_helm.py::test_y[a]") == "integration/k8s"
    assert tier_of("tests/e2e/test_demo.py::test_z") == "e2e"


def test_cpu_share_is_the_machine_busy_time_over_wall_times_cores() -> None:
    clock = TierClock(cores=2)
    clock.add("unit", 10.0, 15.0)
    clock.count("unit")
    clock.add("integration/node", 100.0, 40.0)
    clock.count("integration/node")
    lines = clock.lines()
    unit = next(line for line in lines if line.startswith("unit "))
    node = next(line for line in lines if line.startswith("integration/node"))
    assert "75%" in unit.split()  # 15 cpu-s over 10 s x 2 cores
    assert "20%" in node.split()  # 40 cpu-s over 100 s x 2 cores
    assert lines[1].startswith("integration/node"), "slowest tier first"
    slowest = clock.slowest(1)
    assert len(slowest) == 1 and slowest[0].split()[2] == "20%", slowest


def test_a_tier_past_its_budget_is_named_and_one_without_a_budget_is_over() -> None:
    clock = TierClock(cores=2)
    clock.add("unit", TIER_BUDGET_SECONDS["unit"] + 1, 1.0)
    clock.add("integration/new", 1.0, 1.0)
    clock.add("e2e", 1.0, 1.0)
    over = {t for t, _, _ in clock.over_budget()}
    assert over == {"unit", "integration/new"}
    assert clock.lines()[-1].startswith("over budget: ")
    within = TierClock(cores=2)
    within.add("e2e", 1.0, 1.0)
    assert within.lines()[-1].startswith("every tier within its budget")


def test_without_proc_stat_the_table_shows_wall_only(tmp_path: Path) -> None:
    assert machine_busy_seconds(tmp_path / "missing") is None
    clock = TierClock(cores=2)
    clock.add("unit", 5.0, None)
    assert clock.lines()[1].split()[3] == "-"


def test_the_busy_counter_reads_all_but_idle_and_iowait(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal: busy = 100+0+50+0+0+50 = 200 ticks
    stat.write_text("cpu  100 0 50 9000 500 0 0 50 0 0\ncpu0 1 2 3\n")
    assert machine_busy_seconds(stat) == 200 / os.sysconf("SC_CLK_TCK")
    assert sum(TIER_BUDGET_SECONDS.values()) == SUITE_BUDGET_SECONDS
