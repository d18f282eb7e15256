"""The suite's time table: tiers named by folder, CPU share per tier, budgets named when passed,
and the CPU by process kind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.timing import (
    REFERENCE_PROBE_SECONDS,
    SLOW_BOUND_FACTOR_MAX,
    SUITE_BUDGET_SECONDS,
    TIER_BUDGET_SECONDS,
    ProcessCpu,
    TierClock,
    machine_busy_seconds,
    process_label,
    slow_factor,
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


@pytest.mark.parametrize(("argv", "label"), [
    (["/usr/bin/java", "-Xmx1g", "-cp", "/opt/spark/jars/*", "org.apache.spark.deploy.SparkSubmit",
      "--conf", "x=y"], "java SparkSubmit"),
    (["/opt/java/bin/java", "-Dspark.master=k8s://x", "-cp", "a:b",
      "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend", "--driver-url", "u"],
     "java KubernetesExecutorBackend"),
    (["java", "-Xmx256m", "-classpath", "k/*", "kafka.Kafka", "server.properties"], "java Kafka"),
    (["java", "-jar", "/x/y/app.jar"], "java -jar app.jar"),
    (["/work/.venv/bin/python", "-m", "pytest", "-q", "tests/unit"], "python -m pytest"),
    (["python3", "-c", "import sys"], "python -c"),
    (["/opt/venv/bin/python", "/opt/venv/bin/stream-autoscaler", "runner", "--job", "j.yaml"],
     "python stream-autoscaler runner"),
    (["python3.11", "/tmp/tool.py", "--flag"], "python tool.py"),
    (["/root/.cache/stream-autoscaler/bin/kube-apiserver-v1.37.1", "--etcd-servers=x"],
     "kube-apiserver"),
    (["/root/.cache/stream-autoscaler/bin/etcd-v3.7.3"], "etcd"),
    (["/usr/bin/containerd", "--config", "c.toml"], "containerd"),
    ([], "[kernel]"),
])
def test_a_process_is_named_by_what_it_runs(argv: list[str], label: str) -> None:
    assert process_label(argv, "comm") == label


def _stat(proc: Path, pid: int, comm: str, ticks: int, start: int, argv: list[str]) -> None:
    d = proc / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    # pid (comm) state ppid ... utime(14th) stime(15th) ... starttime(22nd)
    fields = ["S", "1"] + ["0"] * 9 + [str(ticks), "0"] + ["0"] * 6 + [str(start), "0"]
    (d / "stat").write_text(f"{pid} ({comm}) {' '.join(fields)}\n")
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")


def test_cpu_by_process_counts_from_the_first_read_or_birth_and_follows_an_exec(
        tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    sampler = ProcessCpu(proc=proc, tick=0.01)
    _stat(proc, 10, "kube-apiserver", 500, 1, ["/bin/kube-apiserver-v1.37.1"])
    _stat(proc, 20, "bash", 3, 7, ["/bin/bash", "spark-class"])
    sampler.sample()  # the first read: what ran before it is not the run's
    _stat(proc, 10, "kube-apiserver", 800, 1, ["/bin/kube-apiserver-v1.37.1"])
    _stat(proc, 20, "java", 403, 7, ["java", "-cp", "x", "org.apache.spark.deploy.SparkSubmit"])
    _stat(proc, 30, "java", 250, 9, ["java", "kafka.Kafka"])  # born during the run
    sampler.sample()
    (proc / "30" / "stat").unlink()  # gone: its last read still counts
    _stat(proc, 20, "java", 603, 7, ["java", "-cp", "x", "org.apache.spark.deploy.SparkSubmit"])
    sampler.sample()
    totals = {label: round(cpu, 2) for label, cpu, _ in sampler.totals()}
    assert totals == {"java SparkSubmit": 6.0, "kube-apiserver": 3.0, "java Kafka": 2.5}
    lines = sampler.lines(n=2)
    assert lines[1].split()[:3] == ["java", "SparkSubmit", "6.0"]
    assert lines[-1].startswith("1 other kinds"), lines


@pytest.mark.parametrize(
    ("probe", "factor"),
    [
        (0.06, 1.0),  # a faster machine: the bound as set, never shorter
        (REFERENCE_PROBE_SECONDS, 1.0),
        (0.18, 1.5),
        (0.24, 2.0),
        (1.2, SLOW_BOUND_FACTOR_MAX),  # a probe read under a load spike: bounded
    ],
)
def test_a_bound_stretches_with_a_slow_machine_and_never_shrinks(probe, factor) -> None:
    assert slow_factor(probe) == pytest.approx(factor)


def test_a_storys_phases_are_one_line_in_order_with_a_missing_mark_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests import timing

    monkeypatch.setattr(timing, "STORY_PHASES", [])
    line = timing.story_phases("kind-burst", {"first action": 44.5, "crash": None, "end": 790.2})
    assert line == "kind-burst: first action 44, crash never, end 790"
    assert [line] == timing.STORY_PHASES
