"""End to end: `stream-autoscaler demo` — real Spark, real Prometheus, the controller — under a
short burst with chaos: a Prometheus outage (the controller holds and says why) and a killed
driver (recovered from the checkpoint as a scale-out), ending exactly-once.

It runs the word count on whole cores (``k8s/samples/wordcount-demo.yaml``): the chaos story's
timings (an outage at 15 s, a kill at 100 s, 190 s in all) were set on it. The default demo's
job and trace are checked to compose in ``tests/unit/app/test_executor_budget.py``; its run is
measured in the README."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.realcomponents import unavailable

pytestmark = pytest.mark.closed_loop

REPO = Path(__file__).resolve().parents[2]
TRACE = "t,load\n0,0.3\n15,0.9\n80,0.25\n190,0.25\n"


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("java") is None:
        unavailable("no Java: Spark needs Java 17")
    if shutil.which("prometheus") is None:
        unavailable("no prometheus binary: run `make setup`")
    work = tmp_path_factory.mktemp("demo")
    trace = work / "trace.csv"
    trace.write_text(TRACE)
    out = work / "out"
    cmd = [
        sys.executable, "-m", "app.cli", "demo",
        "--job", str(REPO / "k8s" / "samples" / "wordcount-demo.yaml"),
        "--trace", str(trace), "--duration", "190",
        "--chaos", "kill-prometheus@15,kill-driver@100",
        "--out", str(out),
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1500)
    (work / "demo.stdout").write_text(proc.stdout + proc.stderr)
    assert (out / "summary.json").exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.mark.slow
def test_demo_writes_the_contract_outputs(demo_run: Path) -> None:
    summary = json.loads((demo_run / "summary.json").read_text())
    for key in (
        "slo_violation_seconds", "max_lag_seconds", "executor_seconds", "scaling_actions",
        "repartitions", "direction_changes", "records_in", "records_out", "exactly_once",
    ):  # fmt: skip
        assert key in summary, key
    for name in ("timeline.csv", "timeline.png", "report.html", "controller.log"):
        assert (demo_run / name).stat().st_size > 0, name
    header = (demo_run / "timeline.csv").read_text().splitlines()[0]
    assert header.startswith("t,input_rate,processed_rate,backlog_records,lag_seconds,executors")


@pytest.mark.slow
def test_demo_scales_recovers_and_stays_exactly_once(demo_run: Path) -> None:
    summary = json.loads((demo_run / "summary.json").read_text())
    assert summary["exactly_once"] is True, summary.get("verification")
    assert summary["scaling_actions"] >= 1
    assert summary["recovery_seconds"] is not None, summary["chaos"]
    decisions = json.loads((demo_run / "decisions.json").read_text())
    assert any(d["reason"] == "RecoverFromFailure" and d["acted"] for d in decisions)


@pytest.mark.slow
def test_prometheus_outage_holds_and_says_so(demo_run: Path) -> None:
    decisions = json.loads((demo_run / "decisions.json").read_text())
    outage = [d for d in decisions if 18 <= d["t"] <= 44]
    assert outage, decisions[:5]
    assert all(not d["acted"] for d in outage)
    assert any(d["reason"] == "NoMetrics" and "Prometheus" in d["message"] for d in outage)
    after = [d for d in decisions if d["t"] > 50]
    assert any(d["reason"] != "NoMetrics" for d in after)  # metrics came back
