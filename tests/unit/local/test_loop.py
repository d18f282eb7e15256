"""The local controller loop: hot reload keeps the last good policy; failed actions are not
remembered as done. The metrics source and the actuator are seams we own, faked here."""

from __future__ import annotations

import os
from pathlib import Path

from controller.adapters.promql import Window
from controller.core import Action, Decision, MetricsSnapshot, Reason
from controller.local.loop import LocalController, PolicyFile
from tests.unit.core.factories import NOW, snapshot

POLICY = """apiVersion: stream-autoscaler.io/v1alpha1
kind: ScalingPolicy
metadata: {name: p}
spec:
  executors: {min: 1, max: %d}
"""


class Source:
    def __init__(self, snap: MetricsSnapshot) -> None:
        self.snap = snap
        self.windows: list[float] = []

    def snapshot(self, job: str, window: Window, now: float) -> MetricsSnapshot:
        self.windows.append(window.window_seconds)
        return self.snap


class Actuator:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.applied: list[Decision] = []

    def apply(self, decision: Decision) -> None:
        if self.fail:
            raise RuntimeError("409 Repartitioning")
        self.applied.append(decision)


def _write(path: Path, text: str, mtime: float) -> None:
    path.write_text(text)
    os.utime(path, (mtime, mtime))


def _loaded() -> MetricsSnapshot:
    return snapshot(arrival=20_000, executors=2, partitions=8, backlog=100_000, age=10)


def test_edit_takes_effect_at_next_evaluation(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    _write(f, POLICY % 8, 1_000)
    pf = PolicyFile(f)
    assert pf.current().executors.max == 8
    _write(f, POLICY % 3, 2_000)
    assert pf.current().executors.max == 3 and pf.reloads == 1


def test_invalid_edit_is_rejected_and_last_good_policy_stays(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    _write(f, POLICY % 8, 1_000)
    pf = PolicyFile(f)
    _write(f, POLICY.replace("min: 1", "min: 9") % 4, 2_000)
    assert pf.current().executors.max == 8
    assert pf.last_error and "spec.executors.min (9) must be <= spec.executors.max (4)" in (
        pf.last_error
    )
    _write(f, "spec: [unclosed\n", 3_000)
    assert pf.current().executors.max == 8 and "YAML syntax error" in (pf.last_error or "")
    for i, (bad, named) in enumerate([("!!int 'eight'", "'eight' is not an integer"),
                                      ("2001-02-30", "spec.executors.max ('2001-02-30')"),
                                      ("1:30", "'1:30': write numbers in decimal")]):
        _write(f, POLICY.replace("max: %d", f"max: {bad}"), 4_000 + i * 1_000)
        assert pf.current().executors.max == 8, bad  # these raised tracebacks and stopped it
        assert named in (pf.last_error or ""), pf.last_error
    _write(f, POLICY % 6, 9_000)
    assert pf.current().executors.max == 6  # the reload goes on after each refusal


def test_acts_and_remembers_the_action(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    _write(f, POLICY % 8, 1_000)
    act = Actuator()
    loop = LocalController("wordcount", PolicyFile(f), Source(_loaded()), act, clock=lambda: NOW)
    ev = loop.evaluate()
    assert ev.acted and ev.decision.action is Action.REPARTITION
    assert act.applied == [ev.decision]
    assert loop.history.last_action() is not None


def test_a_refused_action_is_not_remembered_as_done(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    _write(f, POLICY % 8, 1_000)
    loop = LocalController(
        "wordcount", PolicyFile(f), Source(_loaded()), Actuator(fail=True), clock=lambda: NOW
    )
    ev = loop.evaluate()
    assert not ev.acted and ev.error and "409" in ev.error
    assert loop.history.last_action() is None  # so no cooldown: the next evaluation retries
    assert [e.kind for e in loop.history.entries] == ["recommendation"]


def test_no_metrics_holds_without_calling_the_actuator(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    _write(f, POLICY % 8, 1_000)
    act = Actuator()
    dead = MetricsSnapshot(job="wordcount", unavailable="Prometheus at http://x: ConnectionError")
    loop = LocalController("wordcount", PolicyFile(f), Source(dead), act, clock=lambda: NOW)
    ev = loop.evaluate()
    assert ev.decision.reason is Reason.NO_METRICS and act.applied == []
    assert "ConnectionError" in ev.decision.message


def test_a_half_written_file_is_adopted_only_once_the_write_settled(tmp_path: Path) -> None:
    """A prefix of a policy can parse (the rest takes defaults): it must not become the policy."""
    f = tmp_path / "p.yaml"
    _write(f, POLICY % 3, 1_000)
    now = [5_000.0]
    pf = PolicyFile(f, clock=lambda: now[0])
    assert pf.current().executors.max == 3
    half = POLICY.split("  executors")[0]  # valid on its own: executors.max would default to 8
    _write(f, half, now[0])  # being written right now
    assert pf.current().executors.max == 3 and pf.reloads == 0
    _write(f, POLICY % 5, now[0] + 0.5)  # the write completes
    now[0] += 0.6
    assert pf.current().executors.max == 3  # written 0.1 s ago: still settling
    now[0] += 1.0
    assert pf.current().executors.max == 5 and pf.reloads == 1
