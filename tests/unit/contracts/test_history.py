"""The scaling history is bounded, serializable, and its trimming never lifts a live block."""

from __future__ import annotations

from contracts.history import HistoryEntry, HistoryLimits, ScalingHistory


def _rec(t: float, n: int = 1) -> HistoryEntry:
    return HistoryEntry(time=t, kind="recommendation", executors=n)


def test_trims_by_count_keeping_the_newest() -> None:
    h = ScalingHistory()
    limits = HistoryLimits(max_entries=5, max_age_seconds=1e9)
    for t in range(12):
        h = h.add(_rec(float(t), t), now=float(t), limits=limits)
    assert [e.executors for e in h.entries] == [7, 8, 9, 10, 11]


def test_trims_by_age() -> None:
    h = ScalingHistory(entries=tuple(_rec(float(t)) for t in range(0, 100, 10)))
    kept = h.trimmed(now=100.0, limits=HistoryLimits(max_entries=100, max_age_seconds=35))
    assert [e.time for e in kept.entries] == [70.0, 80.0, 90.0]


def test_a_block_in_force_survives_trimming() -> None:
    block = HistoryEntry(time=0.0, kind="blocked", executors=4, until=500.0)
    h = ScalingHistory(entries=(block, _rec(90.0)))
    kept = h.trimmed(now=100.0, limits=HistoryLimits(max_entries=10, max_age_seconds=30))
    assert block in kept.entries
    assert kept.blocked(100.0, 4, None) == block
    assert kept.blocked(600.0, 4, None) is None
    assert kept.blocked(100.0, 3, None) is None


def test_round_trips_through_json_as_in_status() -> None:
    h = ScalingHistory().add(_rec(1.0, 3), now=1.0)
    h = h.add(HistoryEntry(time=2.0, kind="action", action="scale", executors=3), now=2.0)
    wire = h.to_wire()
    assert wire["entries"][1]["kind"] == "action"
    assert ScalingHistory.model_validate(wire) == h


def test_direction_changes_counts_flips() -> None:
    entries = tuple(
        HistoryEntry(time=float(i), kind="action", executors=n)
        for i, n in enumerate([2, 4, 6, 3, 5, 5])
    )
    assert ScalingHistory(entries=entries).direction_changes() == 2


def test_default_bound_keeps_status_small() -> None:
    h = ScalingHistory()
    for t in range(1000):
        h = h.add(_rec(float(t), 4), now=float(t))
    assert len(h.entries) == HistoryLimits().max_entries
    assert len(h.model_dump_json()) < 60_000
