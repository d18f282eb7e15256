"""Where `make test`'s time goes: each tier's wall time, the machine's CPU time over it, a
machine-speed probe, and the budgets the tiers are held to.

A tier is a folder under tests/ (``unit``, ``integration/<component>``, ``e2e``). Its wall time
is the sum of its tests' setup, call and teardown, so a slow fixture shows against the tier that
pays it. Its CPU time is the whole machine's busy time (``/proc/stat``, every core, every
process: the JVMs, the test bed's servers and the pods count too) over the same intervals, so
``cpu / (wall x cores)`` says whether a tier computes or waits: a tier near 100% gains nothing
from parallel workers on this machine, one near 20% waits on clocks, traces or I/O.

The probe is one fixed CPU-bound loop, timed before the first test, so figures from different
days and machines can be compared (docs/benchmark.md records the reference machine's figure).

Budgets are printed, not enforced: a tier past its budget is named in the run's summary, so a
tier that grows shows in the next CI log instead of when CI times out (tests/unit/test_timing.py
holds the arithmetic).
"""

from __future__ import annotations

import functools
import os
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

TIER_BUDGET_SECONDS: dict[str, float] = {
    "unit": 90,
    "fuzz": 45,
    "integration/metrics": 90,
    "integration/spark_pipelines": 120,
    "integration/spark_runtime": 600,
    "integration/k8s": 420,
    "integration/kafka": 360,
    "integration/node": 480,
    "integration/kind": 900,
    "integration/s3": 180,
    "integration/cgroups": 30,
    "integration/report": 30,
    "e2e": 300,
}
"""Seconds of wall time each tier may take on the reference machine (2 cores, probe ~1 s). Their
sum is the suite's budget: with `make lint`, the venv and the image check it keeps a warm
`make test` under 40 minutes, the target that leaves CI's 90 minutes for a slow day (1.5-2x)."""

SUITE_BUDGET_SECONDS = sum(TIER_BUDGET_SECONDS.values())
"""The tiers' time added up (what one pytest over every tier would take)."""
WALL_BUDGET_SECONDS = 35 * 60
"""hack/test.sh's wall time (lint and its three phases, the lanes side by side): with a warm
hack/prepare.sh (~1 min) a warm `make test` stays under 40 minutes. hack/test.sh names the
phase that passes it."""

SLOWEST_SHOWN = 25
"""How many of the slowest tests the summary lists with their CPU share."""

PROCESS_SAMPLE_SECONDS = 2.0
"""How often the process table is read for the CPU-by-process summary. A process that lives
less than this between two reads is missed there (its CPU still counts in the tiers' machine
totals)."""

PROCESSES_SHOWN = 15
"""How many process kinds the CPU-by-process summary lists."""

PROBE_LOOPS = 4_000_000
"""The probe's work: a pure-Python loop (the interpreter's speed is what the controller, the
runner and pytest itself spend), long enough to time (~0.3-0.5 s) and short enough to pay on
every run."""


def tier_of(nodeid: str) -> str:
    parts = Path(nodeid.split("::")[0]).parts
    if len(parts) > 2 and parts[1] == "integration":
        return "/".join(parts[1:3])
    return parts[1] if len(parts) > 1 else parts[0]


def machine_busy_seconds(stat: Path = Path("/proc/stat")) -> float | None:
    """CPU-seconds the whole machine has been busy since boot (all cores), or None where
    /proc/stat is missing (not Linux): then the table shows wall time only."""
    try:
        first = stat.read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    # cpu user nice system idle iowait irq softirq steal ...: busy is all but idle and iowait
    ticks = [int(v) for v in first[1:9]]
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy / os.sysconf("SC_CLK_TCK")


def probe_seconds(loops: int = PROBE_LOOPS) -> float:
    """The best of three timings of a fixed pure-Python loop: lower is a faster machine."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        acc = 0
        for i in range(loops):
            acc += i & 7
        best = min(best, time.perf_counter() - t0)
    return best



REFERENCE_PROBE_SECONDS = 0.12
"""The probe on the machine the stories' bounds were set on: the recorded green runs read
0.085-0.165 s (docs/benchmark.md, the suite's own time)."""
SLOW_BOUND_FACTOR_MAX = 3.0
"""How far a wait's bound stretches on a slow machine, at most (the probe read 0.19-0.27 s on
the slowest day recorded)."""


@functools.cache
def session_probe() -> float:
    """The probe, measured once per pytest process (its header prints it)."""
    return probe_seconds()


def slow_factor(probe: float) -> float:
    """How much slower than the reference machine a probe says this one is: at least 1 (a bound
    never shortens), at most :data:`SLOW_BOUND_FACTOR_MAX`."""
    return min(SLOW_BOUND_FACTOR_MAX, max(1.0, probe / REFERENCE_PROBE_SECONDS))


def bound(seconds: float) -> float:
    """A wait's bound on this machine: ``seconds``, as set on the reference machine, stretched by
    :func:`slow_factor`. Only for a wait whose bound ends a test that would otherwise hang (a
    backlog draining at whatever the machine's speed allows), never for a figure a test judges
    (tests/unit/test_timing.py::test_a_bound_stretches_with_a_slow_machine_and_never_shrinks)."""
    return seconds * slow_factor(session_probe())


@dataclass
class TierClock:
    """Wall and machine CPU per tier, and each tier against its budget."""

    busy: Callable[[], float | None] = machine_busy_seconds
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)
    wall: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    cpu: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    tests: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    per_test: list[tuple[float, float | None, str]] = field(default_factory=list)
    has_cpu: bool = True

    def add(self, tier: str, wall: float, cpu: float | None, test: str = "") -> None:
        self.wall[tier] += wall
        self.per_test.append((wall, cpu, test or tier))
        if cpu is None:
            self.has_cpu = False
        else:
            self.cpu[tier] += cpu

    def share(self, cpu: float, wall: float) -> float:
        """Percent of the machine busy over ``wall``; at most 100 (/proc/stat counts in 10 ms
        ticks, so a test of a few ms can read more)."""
        return min(100.0, 100 * cpu / (wall * self.cores))

    def slowest(self, n: int = SLOWEST_SHOWN) -> list[str]:
        """The ``n`` slowest tests (setup and teardown included), each with the machine's CPU
        share over it: where a cut of waiting would pay, and where only less work would."""
        out = []
        for wall, cpu, test in sorted(self.per_test, key=lambda r: -r[0])[:n]:
            share = (f"{self.share(cpu, wall):4.0f}%" if cpu is not None and wall > 0
                     else f"{'-':>5}")
            out.append(f"{wall:8.1f} s {share}  {test}")
        return out

    def count(self, tier: str) -> None:
        self.tests[tier] += 1

    def over_budget(self) -> list[tuple[str, float, float]]:
        """(tier, wall, budget) for every tier past its budget; a tier without one is over."""
        return [(t, w, TIER_BUDGET_SECONDS.get(t, 0.0)) for t, w in self.wall.items()
                if w > TIER_BUDGET_SECONDS.get(t, 0.0)]

    def lines(self) -> list[str]:
        out = [f"{'tier':30} {'tests':>5} {'wall s':>8} {'cpu s':>8} {'busy':>5} {'budget':>7}"]
        rows = sorted(self.wall.items(), key=lambda kv: -kv[1])
        for tier, wall in rows:
            out.append(self._row(tier, self.tests[tier], wall, self.cpu.get(tier, 0.0),
                                 TIER_BUDGET_SECONDS.get(tier)))
        total_wall = sum(self.wall.values())
        out.append(self._row("total", sum(self.tests.values()), total_wall,
                             sum(self.cpu.values()), SUITE_BUDGET_SECONDS))
        over = self.over_budget()
        if over:
            out.append("over budget: " + ", ".join(
                f"{t} {w:.0f} s > {b:.0f} s" for t, w, b in over))
        else:
            out.append(f"every tier within its budget ({total_wall:.0f} s of "
                       f"{SUITE_BUDGET_SECONDS:.0f} s)")
        return out

    def _row(self, tier: str, tests: int, wall: float, cpu: float, budget: float | None) -> str:
        if self.has_cpu and wall > 0:
            cpu_s, share = f"{cpu:8.1f}", f"{self.share(cpu, wall):4.0f}%"
        else:
            cpu_s, share = f"{'-':>8}", f"{'-':>5}"
        budget_s = f"{budget:7.0f}" if budget is not None else f"{'none':>7}"
        return f"{tier:30} {tests:5d} {wall:8.1f} {cpu_s} {share} {budget_s}"


STORY_PHASES: list[str] = []
"""One line per long story that recorded its phases (:func:`story_phases`), printed at the end
of the run whether the story passed or not: a passing story's output is captured, and where its
minutes went is what a cut of the suite's time starts from."""


def story_phases(story: str, marks: dict[str, float | None]) -> str:
    """Records (and returns) ``story``'s line: each mark in seconds on the story's own clock, in
    the order given; a mark that never came is said as such (tests/unit/test_timing.py)."""
    said = [f"{name} {'never' if t is None else f'{t:.0f}'}" for name, t in marks.items()]
    line = f"{story}: " + ", ".join(said)
    STORY_PHASES.append(line)
    return line


_VERSION_SUFFIX = re.compile(r"-v?\d[\w.]*$")
_CLASSPATH_OPTIONS = {"-cp", "-classpath", "--class-path", "--module-path", "-p"}


def process_label(argv: list[str], comm: str) -> str:
    """What a process is, for the CPU-by-process summary.

    A JVM is named by its main class (``java SparkSubmit``, ``java KubernetesExecutorBackend``,
    ``java Kafka``), a Python by its module or script and first subcommand (``python -m
    pytest``, ``python stream-autoscaler runner``), anything else by its binary without a version
    suffix (``kube-apiserver``); a process without a command line is ``[kernel]``
    (tests/unit/test_timing.py holds the table)."""
    if not argv:
        return "[kernel]"
    exe = os.path.basename(argv[0])
    if exe == "java" or exe.startswith("java"):
        args = iter(argv[1:])
        for arg in args:
            if arg in _CLASSPATH_OPTIONS:
                next(args, None)
            elif arg == "-jar":
                return f"java -jar {os.path.basename(next(args, ''))}"
            elif not arg.startswith("-"):
                return f"java {arg.rsplit('.', 1)[-1]}"
        return "java"
    if exe.startswith("python"):
        rest = [a for a in argv[1:] if a not in ("-u", "-B", "-E", "-I", "-s", "-S")]
        if not rest:
            return "python"
        if rest[0] in ("-m", "-c"):
            what = f"{rest[0]} {rest[1]}" if rest[0] == "-m" and len(rest) > 1 else rest[0]
            return f"python {what}"
        script = os.path.basename(rest[0])
        sub = rest[1] if len(rest) > 1 and not rest[1].startswith("-") and "/" not in rest[1] \
            else ""
        return f"python {script} {sub}".rstrip()
    return _VERSION_SUFFIX.sub("", exe) or comm or "?"


def _read_stat(path: Path) -> tuple[str, int, str] | None:
    """(comm, utime + stime ticks, start time) of one /proc/<pid>/stat; None if it is gone."""
    try:
        text = path.read_text()
    except OSError:
        return None
    head, _, tail = text.rpartition(")")
    fields = tail.split()
    if len(fields) < 20:
        return None
    return head.partition("(")[2], int(fields[11]) + int(fields[12]), fields[19]


@dataclass
class _Seen:
    comm: str
    label: str
    first: int
    """CPU ticks when first read (0 for a process born during the run)"""
    last: int


@dataclass
class ProcessCpu:
    """CPU time by process kind over a run, from /proc read every
    :data:`PROCESS_SAMPLE_SECONDS`: the whole machine (the test bed's servers, the pods' JVMs and,
    in the lanes, the other lane's processes too), so it says which programs the tiers' CPU
    went to. A process's CPU before the first read is not counted; one that ``exec``s (a shell
    that becomes a JVM) is named by what it runs at its last read."""

    proc: Path = Path("/proc")
    tick: float = field(default_factory=lambda: 1 / os.sysconf("SC_CLK_TCK"))
    seen: dict[tuple[str, str], _Seen] = field(default_factory=dict)
    """by (pid, start time): a pid reused later is another process"""
    started: bool = False

    def sample(self) -> None:
        first = not self.started
        self.started = True
        try:
            pids = [p for p in os.listdir(self.proc) if p.isdigit()]
        except OSError:
            return
        for pid in pids:
            got = _read_stat(self.proc / pid / "stat")
            if got is None:
                continue
            comm, ticks, start = got
            row = self.seen.get((pid, start))
            if row is None:
                # a process born after the first read counts from its start
                self.seen[(pid, start)] = _Seen(comm, self._label(pid, comm),
                                                ticks if first else 0, ticks)
                continue
            if row.comm != comm:  # exec'd: name it by what it runs now
                row.comm, row.label = comm, self._label(pid, comm)
            row.last = ticks

    def _label(self, pid: str, comm: str) -> str:
        try:
            raw = (self.proc / pid / "cmdline").read_bytes()
        except OSError:
            raw = b""
        return process_label([a.decode(errors="replace") for a in raw.split(b"\0") if a], comm)

    def totals(self) -> list[tuple[str, float, int]]:
        """(label, CPU seconds, processes) by label, most CPU first."""
        cpu: dict[str, float] = defaultdict(float)
        count: dict[str, int] = defaultdict(int)
        for row in self.seen.values():
            used = (row.last - row.first) * self.tick
            if used > 0:
                cpu[row.label] += used
                count[row.label] += 1
        return sorted(((k, v, count[k]) for k, v in cpu.items()), key=lambda r: -r[1])

    def lines(self, n: int = PROCESSES_SHOWN) -> list[str]:
        rows = self.totals()
        total = sum(v for _, v, _ in rows) or 1.0
        out = [f"{'process':44} {'cpu s':>8} {'share':>6} {'count':>6}"]
        for label, cpu, count in rows[:n]:
            out.append(f"{label[:44]:44} {cpu:8.1f} {100 * cpu / total:5.0f}% {count:6d}")
        rest = rows[n:]
        if rest:
            cpu = sum(v for _, v, _ in rest)
            out.append(f"{f'{len(rest)} other kinds':44} {cpu:8.1f} {100 * cpu / total:5.0f}% "
                       f"{sum(c for _, _, c in rest):6d}")
        return out

    def run_in_background(self, every: float = PROCESS_SAMPLE_SECONDS) -> Callable[[], None]:
        """Read now and every ``every`` s in a daemon thread; returns what stops it (after a
        last read)."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(every):
                self.sample()

        self.sample()
        thread = threading.Thread(target=loop, name="process-cpu", daemon=True)
        thread.start()

        def halt() -> None:
            stop.set()
            thread.join(every + 5)
            self.sample()

        return halt
