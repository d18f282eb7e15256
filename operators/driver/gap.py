"""How long a stop at a batch boundary looks for a gap between triggers before stopping anyway.

Spark stops a query by cancelling the batch in flight; a stop meant to end on a committed batch
(a repartition's, a graceful scale-in's) then runs that batch again to its commit in a one-batch
query (the runner's ``drain``: a query start and the whole batch). A stop in a gap between
triggers (``isTriggerActive`` False) needs no drain, so it pays to wait for the batch in flight
when a gap follows it, and not at all when none does:

* batches that outlast the trigger interval start back to back: no gap comes, so waiting only
  delays the stop (it was a fixed 2 s): stop at once;
* batches that end before the next trigger leave a gap after each: wait for it, up to the last
  batch's duration with slack (the batch in flight is about as long), never more than
  :data:`GAP_WAIT_MAX_SECONDS`;
* before any batch's duration is known: :data:`GAP_WAIT_UNKNOWN_SECONDS`.

Pure (tests/unit/operators/driver/test_gap.py); the runner's ``_stop_in_gap`` uses it.
"""

from __future__ import annotations

GAP_WAIT_UNKNOWN_SECONDS = 2.0
"""The wait when no batch has been timed yet (a stop right after a start)."""
GAP_WAIT_FACTOR = 1.5
"""The batch in flight may run this much longer than the last one (a burst's batch grows)."""
GAP_WAIT_SLACK_SECONDS = 0.5
"""Added to the wait: the gap comes after the commit, the progress event, the status poll."""
GAP_WAIT_MAX_SECONDS = 60.0
"""Never wait longer for a gap: a stop is asked for because something must change now."""


def gap_wait_seconds(last_batch_seconds: float | None, trigger_seconds: float) -> float:
    """Seconds to look for a gap between triggers before stopping the query anyway."""
    if last_batch_seconds is None:
        return GAP_WAIT_UNKNOWN_SECONDS
    if last_batch_seconds >= trigger_seconds:  # back to back: no gap comes
        return 0.0
    return min(last_batch_seconds * GAP_WAIT_FACTOR + GAP_WAIT_SLACK_SECONDS,
               GAP_WAIT_MAX_SECONDS)
