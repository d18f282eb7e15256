"""The fuzz tier: hostile policies, StreamJobs, traces and control requests, and what a job
author may try against the cluster (tests/fuzz/hostile.py: Spark settings, JVM flags and mount
paths read as ``validate --cluster`` reads them, attach URLs, checkpoints, simulator models),
generated deterministically, each under a time limit in a worker with a memory cap. Every input
is accepted or refused with a clear error that quotes input escaped; 0 tracebacks, 0 hangs, 0
bypasses (a setting that shapes pods accepted), 0 allowed URLs whose request goes elsewhere.
Figures printed (``-s``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from tests.realcomponents import REPO

SEED = int(os.environ.get("FUZZ_SEED", "20261122"))
COUNT = int(os.environ.get("FUZZ_COUNT", "400"))
"""Inputs per kind (checkpoints half, simulator models a quarter: each is a directory or a
simulation): ~3,100 in all, about half a minute on two cores."""
KINDS = {"policy": COUNT, "streamjob": COUNT, "trace": COUNT, "control": COUNT,
         "clusterjob": COUNT, "url": COUNT, "checkpoint": COUNT // 2, "model": COUNT // 4}
SOURCE = {"policy": "policy-", "streamjob": "streamjob-", "trace": "fuzz.csv",
          "clusterjob": "streamjob-", "url": "spec.attach.controlUrl", "checkpoint": "/cp",
          "model": "model-"}
"""What a refusal must name: the file, the trace, the field or the checkpoint."""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("fuzz") / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tests.fuzz.worker", str(SEED), str(COUNT), str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, f"the worker died (memory cap?): {proc.stderr[-2000:]}"
    data: dict[str, object] = json.loads(out.read_text())
    return data


@pytest.mark.parametrize("kind", list(KINDS))
def test_no_traceback_no_hang(report: dict[str, object], kind: str,
                              capsys: pytest.CaptureFixture[str]) -> None:
    results = report["results"][kind]  # type: ignore[index]
    outcomes = Counter(r["outcome"] for r in results)
    slowest = max(r["seconds"] for r in results)
    with capsys.disabled():
        print(f"\nfuzz {kind}: {len(results)} inputs, {dict(outcomes)}, slowest {slowest:.3f} s "
              f"(seed {report['seed']}, worker {report['seconds']:.1f} s)")
    defects = [r for r in results if r["outcome"] not in ("ok", "refused")]
    assert defects == [], json.dumps(defects[:3], indent=1)
    assert len(results) == KINDS[kind]


@pytest.mark.parametrize("kind", list(SOURCE))
def test_every_refusal_says_where(report: dict[str, object], kind: str) -> None:
    """A refusal names the file (manifests, models), the trace, the field (URLs) or the
    checkpoint, not a bare exception text."""
    source = SOURCE[kind]
    refusals = [r for r in report["results"][kind] if r["outcome"] == "refused"]  # type: ignore[index]
    assert refusals, "the campaign refused nothing: the generators are too tame"
    vague = [r["message"] for r in refusals if source not in r["message"]]
    assert vague == [], vague[:5]
