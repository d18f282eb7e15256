"""Failures and restarts: a restart still settling, and recovery from a failed driver.

Two steps of ``decide`` live here, both about a job that is not simply running:

- :func:`restart_in_flight` (first): a repartition or recovery started before has not produced
  a batch at its new layout yet, so the window describes the old one -> hold;
- :func:`recover` (second, when :func:`~controller.core.diagnosis.failure_evidence` finds the
  driver down, or no commit for ``diagnosis.noProgressSeconds`` that no batch in flight
  explains): restart from the checkpoint with enough executors (and state partitions) to catch
  up -- recovery as scale-out, never to fewer executors than ran the job -- with the new
  query's batches capped
  (:mod:`~controller.core.admission`) so the outage's pile does not land in one batch. A long
  batch in flight is never a failure (:mod:`~controller.core.inflight`).
"""

from __future__ import annotations

import math

from controller.core.admission import admission_cap, admission_cap_from_rate, described
from controller.core.capacity import CapacityModel, Layout, rate_per_executor
from controller.core.decision import Decision, Diagnosis, Sizing
from controller.core.diagnosis import failure_evidence
from controller.core.inflight import overdue
from controller.core.inputs import Inputs
from controller.core.reasons import RESTARTING_ACTIONS, Action, BottleneckKind, Reason


def restart_in_flight(x: Inputs) -> Decision | None:
    """A repartition or recovery has not yet produced a batch at its new layout: wait for it.

    Done means a batch committed after the restart (no sooner than half the expected restart
    time, so the batch that was in flight when the job stopped does not count), or a batch
    started after it that already outlasts the SLO's batch budget, and, for a
    repartition, the stateful stage reporting the new partition count. Without the latter the
    window still describes the old layout and sizing on it would repeat the move.
    """
    last = x.history.last_action()
    if last is None or last.action not in RESTARTING_ACTIONS:
        return None
    s, p = x.snapshot, x.policy.partitions
    budget = p.max_downtime_seconds + x.policy.timing.cooldown_seconds
    elapsed = x.now - last.time
    if elapsed >= budget:
        return None
    if s.driver_up is False and last.action != Action.RECOVER.value:
        return None  # a repartition keeps the runner up: a dead driver now is a new failure
    committed_after = (
        s.seconds_since_progress is not None
        and s.seconds_since_progress < elapsed - p.restart_seconds / 2
    ) or (
        # a batch started at the new layout that outlasts the SLO's batch budget: the restart is
        # done and the job is already behind again; waiting for its commit only lets lag grow
        s.batch_in_flight_seconds is not None
        and s.batch_in_flight_seconds < elapsed - p.restart_seconds / 2
        and overdue(s, x.policy)
    )
    stateful = s.stateful_stage()
    new_layout_seen = (
        last.partitions is None or stateful is None or stateful.partitions == last.partitions
    )
    if committed_after and new_layout_seen:
        return None
    waiting = (
        "the first committed batch"
        if not committed_after
        else (f"a batch at {last.partitions} state partitions")
    )
    return x.hold(
        Reason.ACTION_IN_PROGRESS,
        f"{last.action} started {elapsed:.0f} s ago ({last.reason}); waiting up to "
        f"{budget:.0f} s for {waiting}",
    )


def catch_up_size(x: Inputs, without: str) -> tuple[int, float | None, str, float]:
    """Executors that drain the backlog, and what arrives while they start
    (``partitions.restartSeconds``), within ``lag.catchUpSeconds`` on top of the arrival rate,
    at the rate per executor the last sized action expected; with nothing measured yet, the
    target (``without`` says what that means to the caller). Returns (executors, the rate
    required or None, a note for the message, records/s per executor or 0)."""
    s, pol = x.snapshot, x.policy
    fallback = s.target_executors or s.executors or pol.executors.initial or pol.executors.min
    n = max(fallback, pol.executors.min, 1)
    note = f"no measured capacity yet: {without}"
    required = None
    per_exec = rate_per_executor(x.history)
    if per_exec > 0 and s.arrival_rate is not None:
        outage = s.seconds_since_progress or 0.0
        backlog = (s.backlog_records or s.arrival_rate * outage) + (
            s.arrival_rate * pol.partitions.restart_seconds
        )
        required = s.arrival_rate + backlog / pol.lag.catch_up_seconds
        ratio = required / per_exec  # may overflow to inf with absurd rates: then the maximum
        n = pol.executors.max if not ratio <= pol.executors.max else math.ceil(ratio)
        n = max(pol.executors.min, 1, n)
        note = (
            f"need {required:,.0f} records/s to drain {backlog:,.0f} records within "
            f"{pol.lag.catch_up_seconds:g} s"
        )
    return min(n, pol.executors.max), required, note, per_exec


def recovery_partitions(
    model: CapacityModel | None, executors: int, current: int, want: int,
    required: float | None,
) -> tuple[int | None, str]:
    """State partitions a recovery restores with: ``want`` (a slot's share for each of the
    ``executors``) only where the measured stage costs show the catch-up needs them, else the
    checkpoint's ``current`` (None). Returns them and a note for the message ("" or why kept).

    A recovery restarts the query anyway, but a repartition at its start also counts, rewrites
    and verifies the whole state before the first batch: on pods with ``s3a://`` 25 s of a
    40 s outage (docs/benchmark.md, the script story's recovery), while the pile grows. The
    executors join whatever the count; only the stateful stage's parallelism waits for it. So
    a recovery pays the rewrite where ``required`` (the catch-up rate) is beyond the layout at
    ``current`` and ``want`` adds capacity; blind (no stage costs measured, no rate required)
    it restores the checkpoint's layout, and the running job's own batches show whether its
    state partitions bind (the engine's repartition, priced by its downtime). Held by
    tests/unit/core/test_engine.py, "a recovery keeps the checkpoint's state partitions..."
    and "a recovery repartitions where the catch-up needs it"."""
    if model is None or required is None:
        return None, (f"; {current} state partitions kept: no measured stage cost shows they "
                      f"bound the catch-up, and a repartition would lengthen the outage by "
                      f"rewriting the state")
    keep = model.capacity(Layout(executors, current, True))
    if keep >= required:
        return None, (f"; {current} state partitions kept: at them {executors} executor(s) "
                      f"carry {keep:,.0f} records/s of the {required:,.0f} the catch-up needs")
    if model.capacity(Layout(executors, want, True)) <= keep:
        return None, (f"; {current} state partitions kept: {want} would add no capacity "
                      f"(the stateful stage does not bind)")
    return want, ""


def recover(x: Inputs, evidence: tuple[str, ...] = ()) -> Decision:
    """Recovery as scale-out: restart from the checkpoint with enough capacity to catch up,
    and never fewer executors than ran the job (the batch in flight replays as planned for them).

    ``evidence``: why the job is down, when the caller knows more than the snapshot can say (a
    driver pod that is gone, not one that does not answer); by default
    :func:`~controller.core.diagnosis.failure_evidence`."""
    s, pol = x.snapshot, x.policy
    found = list(evidence) or failure_evidence(s, pol)
    diagnosis = Diagnosis(kind=BottleneckKind.FAILURE, evidence=tuple(found))
    n, required, note, per_exec = catch_up_size(x, "restarting at the last size")
    ran = min(s.executors or 0, pol.executors.max)
    if n < ran:
        # Scale-out, never in: the batch in flight at the failure replays as its driver planned
        # it for ``ran`` executors, on cold JVMs that load the state first; fewer would replay
        # it slower (on pods, 1 of 2: 20 s before the first commit). A surplus goes later, by
        # the scale-in's own window (test_engine.py, "a recovery never restores fewer").
        note = (f"{note}; {ran} executor(s) as before the failure, not {n}: the batch in "
                f"flight replays as planned for them")
        n = ran
    partitions = None
    model = CapacityModel.from_snapshot(s, pol.lag.slo_seconds)
    cur_p = next((st.partitions for st in s.stages if st.kind == "stateful"), None)
    if cur_p is None:
        cur_p = next((e.partitions for e in reversed(x.history.entries) if e.partitions), None)
    if cur_p is not None and pol.partitions.repartition:
        want = min(
            max(n * (s.cores_per_executor or 1) * pol.partitions.per_slot, pol.partitions.min),
            pol.partitions.max,
        )
        if want > cur_p:
            partitions, kept = recovery_partitions(model, n, cur_p, want, required)
            note += kept
    # the pile of the outage lands in the new query's first batch unless the source caps it
    cap = admission_cap(x, model, partitions or cur_p) if model is not None else None
    if cap is None:
        cap = admission_cap_from_rate(x, per_exec)
    return Decision(
        action=Action.RECOVER,
        reason=Reason.RECOVER_FAILURE,
        message=f"{'; '.join(found)}: restart from the latest checkpoint with {n} "
        f"executor(s){f' and {partitions} state partitions' if partitions else ''}; {note}"
        f"{described(cap, x)}",
        target_executors=n,
        target_partitions=partitions,
        max_records_per_batch=cap.records if cap else None,
        enforced=x.enforced,
        diagnosis=diagnosis,
        sizing=Sizing(required_rate=required, recommended_executors=n, catching_up=True),
    )
