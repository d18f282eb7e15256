"""benchmarks/unseen.py: every seed draws valid traces, and a loss is named only where the
engine lost (the figures themselves: ``make bench-unseen``)."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

from contracts.trace import parse_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import unseen


@pytest.mark.parametrize("seed", range(40))
def test_every_seed_draws_traces_the_simulator_reads(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(5):
        what, text = unseen.scenario(rng)
        trace = parse_trace(text, what)
        assert trace.duration >= 300, what
        assert min(trace.values) > 0, what


def _row(slo: float, exec_s: float) -> dict[str, Any]:
    return {"slo_violation_seconds": slo, "executor_seconds": exec_s}


@pytest.mark.parametrize(
    ("name", "rows", "lost"),
    [
        ("better on both", {"engine": _row(0, 900), "flink": _row(20, 1000),
                            "static-mean": _row(40, 800), "static-peak": _row(0, 2000)}, []),
        ("over the SLO past flink's slack", {"engine": _row(30, 900), "flink": _row(20, 1000),
                                             "static-mean": _row(40, 800),
                                             "static-peak": _row(0, 2000)}, ["SLO 30 s"]),
        ("dearer than a clean static size", {"engine": _row(0, 900), "flink": _row(0, 850),
                                             "static-mean": _row(0, 800),
                                             "static-peak": _row(0, 2000)},
         ["the cheapest clean static 800"]),
        ("1.5x flink's cost and no better on the SLO",
         {"engine": _row(5, 1600), "flink": _row(5, 1000), "static-mean": _row(40, 800),
          "static-peak": _row(0, 2000)}, ["vs flink 1000"]),
    ],
)  # fmt: skip
def test_a_loss_is_named_only_where_the_engine_lost(
    name: str, rows: dict[str, dict[str, Any]], lost: list[str]
) -> None:
    got = unseen.losses(rows)
    assert len(got) == len(lost), (name, got)
    for want, line in zip(lost, got, strict=True):
        assert want in line, (name, line)
