"""Executors lost with their node: a failed operator, recovered as scale-out, in place.

The runner removes executors whose node stopped reporting -- killed in Spark, their pods
force-deleted -- so that Spark replaces them up to the unchanged target
(``operators/query/node_loss.py``), and says when (``seconds_since_executor_loss``). Spark's
same-count replacement restores the capacity the job had, not the capacity it needs now: the
batch the loss hung held the records of the minutes Kubernetes took to call the node lost, and
more arrived meanwhile. While a loss is recent (:func:`settling`: within the metrics window
plus ``lag.catchUpSeconds``), this step decides alone:

- executors: the count that drains that backlog within ``lag.catchUpSeconds``
  (:func:`~controller.core.failure.catch_up_size`, recovery's sizing), never fewer than the
  target before the loss; more than the target is an in-place scale-out with reason
  ``ExecutorsLost``, taken once per loss;
- otherwise a hold with that reason: the window's batches ran on lost executors or waited for
  replacements -- slow because of the loss, not the load -- and sizing on them would read the
  recovery as saturation (or the drop in live executors as a scale-in already done).

A dead driver is not this step's: the failure step runs before it and restarts the job.
Held by ``tests/unit/core/test_lost_executors.py`` and the lost-worker story of the kind tier.
"""

from __future__ import annotations

from controller.core.decision import Decision, Diagnosis, Sizing
from controller.core.failure import catch_up_size
from controller.core.inputs import Inputs
from controller.core.reasons import Action, BottleneckKind, Reason


def settle_seconds(x: Inputs) -> float:
    """How long a loss distorts what the engine reads: the metrics window, plus the catch-up the
    replacement was sized for."""
    return x.policy.timing.window_seconds + x.policy.lag.catch_up_seconds


def settling(x: Inputs) -> float | None:
    """Seconds since the last loss while it is recent enough to distort the window
    (:func:`settle_seconds`), else None."""
    since = x.snapshot.seconds_since_executor_loss
    if since is None or since >= settle_seconds(x):
        return None
    return since


def replace_lost(x: Inputs) -> Decision | None:
    """The decision while executors lost with their node are being replaced, or None when no
    loss is recent."""
    since = settling(x)
    if since is None:
        return None
    s, pol = x.snapshot, x.policy
    lost = s.executors_lost or 0
    what = f"{lost} executor(s)" if lost else "executors"
    diagnosis = Diagnosis(kind=BottleneckKind.FAILURE, evidence=(
        f"{what} lost with their node {since:.0f} s ago; the runner removed them so that "
        "Spark replaces them",))
    before = s.target_executors or s.executors or pol.executors.min
    n, required, note, _ = catch_up_size(x, "replacing the lost executors up to the target")
    last = x.history.last_action()
    reacted = (last is not None and last.reason == Reason.EXECUTORS_LOST.value
               and last.time >= x.now - since)
    if n > before and not reacted:
        return Decision(
            action=Action.SCALE,
            reason=Reason.EXECUTORS_LOST,
            message=f"{diagnosis.evidence[0]}: {before} -> {n} executors, beyond Spark's "
            f"same-count replacement; {note}",
            target_executors=n,
            enforced=x.enforced,
            diagnosis=diagnosis,
            sizing=Sizing(required_rate=required, recommended_executors=n, catching_up=True),
        )
    if reacted and last is not None:
        done = f"scaled to {last.executors} for it"
    elif before >= pol.executors.max:
        done = f"Spark replaces them up to the target {before}, executors.max ({note})"
    else:
        done = f"Spark replaces them up to the target {before}, enough: {note}"
    return x.hold(
        Reason.EXECUTORS_LOST,
        f"{diagnosis.evidence[0]}; {done}; nothing sized on the window's batches, slowed by "
        f"the loss, for {settle_seconds(x) - since:.0f} s more",
        diagnosis,
    )
