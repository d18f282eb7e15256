"""``decide(snapshot, policy, history, now) -> Decision``: the pure decision engine.

The pipeline, in order (each step may end in a hold that says why):

1. failure (:mod:`~controller.core.failure`): a restart still settling -> wait for it; the
   driver down or stalled -> recover from the checkpoint, sized to catch up;
2. data (here): no, stale or too few metrics -> hold (unknown is never zero); a batch in flight
   explains old metrics, and one running longer than the SLO allows is sized on
   (:mod:`~controller.core.inflight`: a long batch is under-provisioning, not staleness or
   failure); then executors lost with their node (:mod:`~controller.core.lost_executors`) ->
   scale out in place to catch up, and size nothing on the batches the loss slowed while it
   settles;
3. sizing (:mod:`~controller.core.sizing`, DS2): the required rate is arrival + backlog /
   catch-up time; the smallest layout (executors, state partitions) that carries it at the
   target utilization, in place or with a restart that spreads state over the new slots (the
   SEEP move, :mod:`~controller.core.repartition`); each task's fixed cost, fitted over windows
   at different loads (:mod:`~controller.core.taskcost`), is paid once per task wave of a
   batch, not per record; the stateful stage runs on the executors holding its state
   (:func:`~controller.core.capacity.state_holders`), so executors added in place do not help it;
4. the guards (:mod:`~controller.core.guards`): act only outside [low, high]; scale in only to
   the highest recommendation over the stabilization window (longer after recent direction
   changes), never while catching up; cooldown after an action (a scale-in never holds back a
   scale-out), and no scale-out sized on a recovery's first batches while the load stays within
   what it was sized for (:func:`~controller.core.cooldown.recovery_transient`); a scale-in
   is weighed against the next burst when the history shows bursts recur
   (:mod:`~controller.core.recurrence`); scale-outs that did not help stay blocked for
   a while, for that kind of move only (Dhalion's blacklist); one that helped less than
   modelled has later gains credited only the share it delivered
   (:func:`~controller.core.guards.observed_gain_share`, Flink's scalability coefficient);
5. anticipation (:mod:`~controller.core.anticipation`): where the job's past bursts came at a
   regular period, a hold that says the job is fine as it is gives way to the layout the last
   burst needed, a lead before the next is due;
6. a repartition or recovery caps the batches of the query it starts
   (:mod:`~controller.core.admission`), so what piled up while the job was down drains in batches
   the SLO allows instead of one giant batch; a cap that binds (its batches read all of it and
   end early while the job falls behind) is lifted first, by a restart at the same layout with
   a cap sized from those batches (:mod:`~controller.core.caplift`).

Every threshold is a policy field (:mod:`contracts.policy`) except
:data:`~controller.core.sizing.WORTHWHILE_SHARE`, the capacity model's wall-time fit
(:data:`~controller.core.capacity.WALL_FIT_BATCH_SHARE`,
:data:`~controller.core.capacity.WALL_FIT_MIN_RATIO`), the task-wave step
(:data:`~controller.core.capacity.WAVE_STEP`), the fit of the fixed cost per task
(:data:`~controller.core.taskcost.MIN_SAMPLES`, :data:`~controller.core.taskcost.MIN_SPREAD`,
:data:`~controller.core.taskcost.MIN_FIXED_SHARE`,
:data:`~controller.core.capacity.MAX_FIXED_SHARE`) and the scale-in flip back-off
(:data:`~controller.core.guards.FLIP_BACKOFF`, :data:`~controller.core.guards.FLIP_MEMORY`)
and what makes executors a surplus inside the band (:data:`~controller.core.guards.SURPLUS_SHARE`)
and the admission cap's batch length (:data:`~controller.core.admission.ADMISSION_BATCH_TRIGGERS`)
and when a cap binds (:data:`~controller.core.caplift.CAP_READ_SHARE`,
:data:`~controller.core.caplift.CAP_LIFT_GAIN`) and when bursts recur
(:data:`~controller.core.recurrence.RECURRENCE_MIN_BURSTS`,
:data:`~controller.core.recurrence.RECURRENCE_TOLERANCE`,
:data:`~controller.core.recurrence.RECURRENCE_MAX_PERIODS`) and what grade names a shortfall
(:data:`~controller.core.grading.SHORTFALL_SHARE`), documented where they are declared.
"""

from __future__ import annotations

from dataclasses import replace

from contracts.history import ScalingHistory
from contracts.policy import ScalingPolicySpec
from controller.core.anticipation import anticipate
from controller.core.capacity import CapacityModel, state_holders
from controller.core.caplift import lift
from controller.core.decision import Decision, Diagnosis, Sizing
from controller.core.diagnosis import diagnose, failure_evidence
from controller.core.failure import recover, restart_in_flight
from controller.core.grading import described as graded
from controller.core.grading import described_recommendation as recommended
from controller.core.grading import grade, grade_recommendation
from controller.core.guards import band, observed_gain_share, scale_in
from controller.core.inflight import unexplained_age, with_batch_in_flight
from controller.core.inputs import Inputs
from controller.core.lost_executors import replace_lost
from controller.core.reasons import Action, Reason
from controller.core.sizing import demand, plan, sizing_of
from controller.core.snapshot import MetricsSnapshot
from controller.core.taskcost import fixed_task_seconds
from controller.core.taskcost import samples as cost_samples


def decide(
    snapshot: MetricsSnapshot, policy: ScalingPolicySpec, history: ScalingHistory, now: float
) -> Decision:
    """What the job should run with now, and why. Pure: same inputs, same decision. The last
    action that added capacity is graded once it can be, and in ``mode: recommend`` each
    scale-out recommended and not carried out (:mod:`~controller.core.grading`): the grade
    rides on the decision, which says it."""
    d = _decide(snapshot, policy, history, now)
    x = Inputs(snapshot, policy, history, now)
    g = grade(x)
    if g is not None:
        return d.model_copy(update={"grade": g, "message": d.message + graded(g)})
    r = grade_recommendation(x)
    if r is not None:
        return d.model_copy(update={"grade": r, "message": d.message + recommended(x, r)})
    return d


def _decide(
    snapshot: MetricsSnapshot, policy: ScalingPolicySpec, history: ScalingHistory, now: float
) -> Decision:
    x = Inputs(snapshot, policy, history, now)
    in_flight = restart_in_flight(x)
    if in_flight is not None:
        return in_flight
    if failure_evidence(snapshot, policy):
        return recover(x)
    snapshot = with_batch_in_flight(snapshot, policy)
    x = Inputs(snapshot, policy, history, now)
    problem = _data_problem(x)
    if problem is not None:
        return problem
    lost = replace_lost(x)  # known, fresh metrics: a loss settling decides alone
    if lost is not None:
        return lost
    fixed = fixed_task_seconds((*history.costs, *cost_samples(snapshot, now)))
    holders = state_holders(history, snapshot.executors) if snapshot.executors else None
    model = CapacityModel.from_snapshot(snapshot, policy.lag.slo_seconds, fixed, holders)
    diagnosis = diagnose(snapshot, model, policy)
    if model is None:
        return _without_model(x, diagnosis)
    share = observed_gain_share(x)
    if share < 1.0:
        model = replace(model, gain_share=share)
    return _resize(x, model, diagnosis)


def _data_problem(x: Inputs) -> Decision | None:
    """No, stale or too few metrics: hold, saying which (unknown is never zero).

    Stale means older than ``timing.staleAfterSeconds`` beyond what a batch in flight explains:
    a job running a long batch commits nothing meanwhile, yet its driver reports the batch, so
    its metrics are current (:func:`~controller.core.inflight.unexplained_age`)."""
    s, t = x.snapshot, x.policy.timing
    if s.observed_at is None:
        why = f" ({s.unavailable})" if s.unavailable else ""
        return x.hold(Reason.NO_METRICS, f"no metrics for this job{why}: holding the current size")
    age = x.now - s.observed_at
    if unexplained_age(s, age) > t.stale_after_seconds:
        running = (
            f", {s.batch_in_flight_seconds:.0f} s of it a batch in flight"
            if s.batch_in_flight_seconds
            else ""
        )
        return x.hold(
            Reason.STALE_METRICS,
            f"newest metrics are {age:.0f} s old{running} (stale after "
            f"{t.stale_after_seconds:g} s): holding the current size",
        )
    missing = [
        name
        for name, value in (("executors", s.executors), ("arrival rate", s.arrival_rate))
        if value is None
    ]
    if missing:
        return x.hold(
            Reason.NO_METRICS, f"unknown {' and '.join(missing)}: holding the current size"
        )
    if s.batches is not None and s.batches < t.min_batches and (s.arrival_rate or 0) > 0:
        return x.hold(
            Reason.INSUFFICIENT_DATA,
            f"{s.batches} batch(es) in the window, need {t.min_batches} to size the job",
        )
    return None


def _without_model(x: Inputs, diagnosis: Diagnosis) -> Decision:
    """No cost measurements: an idle job may shrink to the minimum, anything else holds. Idle
    is known, never assumed: an unknown backlog is not read as none."""
    s = x.snapshot
    if s.arrival_rate == 0 and s.backlog_records is None and s.executors is not None:
        return x.hold(
            Reason.NO_METRICS,
            f"nothing arrives, but the backlog is unknown: holding {s.executors} "
            "(an unknown backlog is never read as none)",
            diagnosis,
        )
    idle = s.arrival_rate == 0 and s.backlog_records == 0
    if not idle or s.executors is None:
        return x.hold(
            Reason.INSUFFICIENT_DATA,
            "no per-record cost measured yet (no processed records with busy time)",
            diagnosis,
        )
    target = x.policy.executors.min
    sizing = Sizing(required_rate=0.0, recommended_executors=target)
    return scale_in(x, target, s.executors, sizing, diagnosis, "the job is idle")


def _resize(x: Inputs, model: CapacityModel, diagnosis: Diagnosis) -> Decision:
    """Size the job (DS2) and let the guards decide whether to act on it; where an admission
    cap binds, lift it, unless the sizing restarts the job onto more executors anyway (that
    restart sizes a new cap for them: a lift at the same size first would cost the job a
    restart more, a ramp's capped batches also overrunning their trigger:
    ``test_caplift.py::test_a_cap_that_binds_on_saturated_executors_restarts_the_job_onto_more_of_them``)."""
    lifted = lift(x, model, diagnosis)
    d = demand(x, model)
    p = plan(x, model, d.required, d.arrival)
    decided = band(x, model, d, p, sizing_of(x, model, d, p), diagnosis)
    if lifted is not None and not (
        decided.action is Action.REPARTITION
        and (decided.target_executors or 0) > model.current_executors
    ):
        return lifted
    return anticipate(x, model, decided) or decided
