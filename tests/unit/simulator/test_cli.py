"""``stream-autoscaler simulate``: files per the contract, comparison, clean errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from app.cli import main
from contracts.trace import load_trace
from controller.simulator.compare import ALL

SHORT = "t,load\n0,1\n20,3\n60,1\n90,1\n"
SUMMARY_KEYS = {
    "slo_violation_seconds",
    "max_lag_seconds",
    "executor_seconds",
    "scaling_actions",
    "repartitions",
    "direction_changes",
    "oracle_executor_seconds",
    "records_in",
    "records_processed",
    "backlog_end",
    "actions_per_load_change",
}
TIMELINE = [
    "t",
    "input_rate",
    "processed_rate",
    "backlog_records",
    "lag_seconds",
    "executors",
    "partitions",
    "action",
    "reason",
]


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    p = tmp_path / "short.csv"
    p.write_text(SHORT)
    return p


def test_simulate_writes_summary_timeline_and_plot(tmp_path: Path, trace: Path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["simulate", "--trace", str(trace), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary.keys() >= SUMMARY_KEYS
    assert summary["records_in"] == pytest.approx(
        summary["records_processed"] + summary["backlog_end"]
    )
    with (out / "timeline.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert all(c in rows[0] for c in TIMELINE)
    assert len(rows) == 91
    assert (out / "timeline.png").stat().st_size > 10_000
    assert not (out / "comparison.json").exists()
    assert "engine" in capsys.readouterr().out


def test_baseline_all_writes_comparison(tmp_path: Path, trace: Path, capsys) -> None:
    out = tmp_path / "out"
    code = main(
        ["simulate", "--trace", str(trace), "--baseline", "all", "--out", str(out), "--quiet"]
    )
    assert code == 0
    cmp = json.loads((out / "comparison.json").read_text())
    assert list(cmp) == list(ALL)
    assert cmp["oracle"]["executor_seconds"] <= min(
        s["executor_seconds"] for n, s in cmp.items() if s["slo_violation_seconds"] == 0
    )
    assert (out / "baselines" / "hpa" / "timeline.csv").exists()
    assert capsys.readouterr().out == ""


def test_recorded_timeline_replays_as_a_trace(tmp_path: Path, trace: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    assert main(["simulate", "--trace", str(trace), "--out", str(first), "--quiet"]) == 0
    replay = load_trace(str(first / "timeline.csv"))
    assert replay.unit == "input_rate" and replay.rate_at(30) == pytest.approx(30_000)
    args = ["simulate", "--trace", str(first / "timeline.csv"), "--out", str(second), "--quiet"]
    assert main(args) == 0
    assert json.loads((second / "summary.json").read_text())["records_in"] > 0


def test_chaos_and_duration(tmp_path: Path, trace: Path) -> None:
    out = tmp_path / "out"
    args = [
        "simulate",
        "--trace",
        str(trace),
        "--baseline",
        "static",
        "--duration",
        "80",
        "--chaos",
        "kill-driver@30",
        "--out",
        str(out),
        "--quiet",
    ]
    assert main(args) == 0
    static = json.loads((out / "comparison.json").read_text())["static"]
    assert static["duration_seconds"] == 80 and static["failures"] == [30.0]
    assert static["downtime_seconds"] > 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--baseline", "nope"], "--baseline 'nope'"),
        (["--chaos", "kill-executor@3"], "kind must be one of kill-driver"),
        (["--chaos", "kill-driver@soon"], "not a number"),
        (["--model", "/nonexistent/m.yaml"], "cannot read"),
        (["--policy", "/nonexistent/p.yaml"], "cannot read"),
        (["--duration", "-5"], "--duration (-5) must be > 0"),
        (["--duration", "inf"], "--duration (inf) must be > 0 and at most 604800 s"),
        (["--duration", "nan"], "--duration (nan) must be > 0"),
        (["--duration", "1e12"], "at most 604800 s"),
    ],
    ids=["baseline", "chaos-kind", "chaos-time", "model-missing", "policy-missing", "duration",
         "duration-inf", "duration-nan", "duration-1e12"],
)
def test_bad_arguments_exit_2_with_a_message(
    tmp_path: Path, trace: Path, capsys, extra: list[str], message: str
) -> None:
    assert main(["simulate", "--trace", str(trace), "--out", str(tmp_path / "o"), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_bad_trace_names_the_line(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("t,load\n0,1\n5,x\n")
    assert main(["simulate", "--trace", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert f"{bad}:3" in capsys.readouterr().err
