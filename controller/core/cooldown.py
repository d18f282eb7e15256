"""The cooldown: how soon after the last action the next one may come.

No action within ``timing.cooldownSeconds`` of the last one, except

- a scale-out for load that outgrew what the last scale-out was sized for (:func:`_outgrown`);
- a scale-out after a scale-in, unless that is the scale-in's own transient: the same load and
  no lag, within a cooldown and a metrics window of it (:func:`_scale_in_settling`).

A recovery's own transient holds back a scale-out past the cooldown too
(:func:`recovery_transient`): its first batches reload state and drain the outage's pile.

Every threshold here is named below; the timings are the policy's (``spec.timing``).
"""

from __future__ import annotations

from contracts.history import HistoryEntry
from controller.core.capacity import rate_per_executor
from controller.core.inputs import Inputs
from controller.core.reasons import Reason

SCALE_OUT_REASONS = frozenset({Reason.SCALE_OUT.value, Reason.REPARTITION_OUT.value})
"""The actions that added capacity for load: the ones the ineffective-action guard judges and
whose sizing the load can outgrow."""
LOAD_RETURNED_FACTOR = 1.1
"""Arrival above the rate a scale-in began at by this factor: the load came back."""
LOAD_OUTGREW_FACTOR = 1.1
"""Arrival above the capacity the last scale-out was sized to carry (its expected rate, at
``utilization.target``) by this factor at least: the load outgrew that action, and its cooldown
does not hold the next scale-out. For the cooldown the edge is where that layout passes
``utilization.high`` (``high / target`` times its expected rate, when larger): within it the
layout still carries the load inside the band (:func:`_outgrown`)."""


def cooldown(x: Inputs, *, growing: bool) -> str | None:
    """Why acting now is too soon after the last action, or None. A scale-in never holds back
    a scale-out for load that came back (arrival over ``LOAD_RETURNED_FACTOR`` times the rate
    it began at, or unknown) or for a lag that grows (a backlog older than
    ``lag.backlogToleranceSeconds``). At the same load and no lag, what follows a scale-in for a
    cooldown and a metrics window is its own transient — state reloaded on the executors that
    remain, their batches' fixed time at a layout not yet measured — not a need: on real Spark
    at half a core, one read 103% busy 26 s after a scale-in 3 -> 2 and restarted to 3, and the
    same 2 executors ran 53% busy after the next scale-in."""
    last = x.history.last_action()
    if last is None:
        return None
    elapsed = x.now - last.time
    if growing and last.reason == Reason.SCALE_IN.value:
        return _scale_in_settling(x, last, elapsed)
    if growing and last.reason in SCALE_OUT_REASONS and _outgrown(x, last):
        return None
    cd = x.policy.timing.cooldown_seconds
    if elapsed < cd:
        return f"last action ({last.reason}) {elapsed:.0f} s ago; cooldown {cd:g} s"
    return None


def _outgrown(x: Inputs, last: HistoryEntry) -> bool:
    """True if the arrival outgrew what the last scale-out was sized for: a burst's first
    seconds can size a step the rest of it outgrows (on real Spark at half a core, 1 -> 2 at
    the onset, then 25 s of cooldown while the lag grew to 15 s at 137k records/s against 2's
    60k). The arrival is the source's, not a reading of the new executors' transient. Outgrown
    means past what that layout carries at ``utilization.high``: a restart sized on a window
    that still held the load before a 5.6x step (39,200 records/s needed, 54,880 at the target)
    was restarted again 20 s later at 66,600 arriving — which its 8 executors carried 85%
    busy — on its own first batches' costs, to 16 executors for the 25 minutes the step held
    (``test_cooldown.py``, "within what it carries at utilization.high")."""
    arrival = x.snapshot.arrival_rate
    if arrival is None or last.expected_rate is None:
        return False
    pol = x.policy.utilization
    # past what that layout carries at the band's upper edge (utilization.high; the expected
    # rate is at the target), never less than LOAD_OUTGREW_FACTOR times the expected rate
    edge = max(pol.high / pol.target, LOAD_OUTGREW_FACTOR)
    return arrival > last.expected_rate * edge


def _scale_in_settling(x: Inputs, last: HistoryEntry, elapsed: float) -> str | None:
    s, t = x.snapshot, x.policy.timing
    settle = t.cooldown_seconds + t.window_seconds
    if elapsed >= settle or last.rate_before is None or s.arrival_rate is None:
        return None
    if s.arrival_rate > last.rate_before * LOAD_RETURNED_FACTOR:
        return None
    age = s.backlog_age_seconds
    if age is None or age > x.policy.lag.backlog_tolerance_seconds:
        return None
    return (
        f"last action (ScaleIn) {elapsed:.0f} s ago at {last.rate_before:,.0f} records/s; the "
        f"arrival ({s.arrival_rate:,.0f}) has not come back and the backlog is {age:.0f} s old: "
        f"letting the scale-in settle for {settle:g} s (cooldown and one window)"
    )


def recovery_transient(x: Inputs) -> str | None:
    """Why a scale-out now would be sized on a recovery's own transient, or None.

    A recovery (``RecoverFromFailure``) starts the query again on executors sized to drain what
    piled up within ``lag.catchUpSeconds``, at the rate per executor that healthy batches
    delivered (:func:`controller.core.failure.catch_up_size`). Its first batches reload state
    onto those executors and drain the outage's pile: slow for that, not for the load, and read
    as the job's capacity they ask for absurd sizes (on the kind cluster, one executor recovered
    for 16,000 records/s read 652% busy at 400 records/s and was scaled out 1 -> 4, undone two
    minutes later). So while the arrival stays within what the recovery was sized to carry
    (up to :data:`LOAD_OUTGREW_FACTOR` times it), no scale-out is sized on those batches until
    the recovery has had its restart, one metrics window and its catch-up time
    (``partitions.restartSeconds + timing.windowSeconds + lag.catchUpSeconds``). A load beyond
    it, or a recovery sized on no measured capacity, is sized as ever; a scale-in waits anyway
    while the pile drains. Held by tests/unit/core/test_cooldown.py."""
    last = x.history.last_action()
    if last is None or last.reason != Reason.RECOVER_FAILURE.value or not last.executors:
        return None
    pol, arrival = x.policy, x.snapshot.arrival_rate
    settle = (pol.partitions.restart_seconds + pol.timing.window_seconds
              + pol.lag.catch_up_seconds)  # fmt: skip
    elapsed = x.now - last.time
    per_exec = rate_per_executor(x.history, until=last.time)
    if elapsed >= settle or arrival is None or per_exec <= 0:
        return None
    sized = per_exec * last.executors
    if arrival > sized * LOAD_OUTGREW_FACTOR:
        return None
    return (
        f"recovered {elapsed:.0f} s ago with {last.executors} executor(s) for {sized:,.0f} "
        f"records/s, and {arrival:,.0f} arrive: its first batches reload state and drain the "
        f"outage's pile, slow for that and not for the load; no scale-out sized on them for "
        f"{settle - elapsed:.0f} s more"
    )
