"""StreamJob status, computed from what was observed and decided (pure: no API calls).

Usage::

    st = StatusDraft.from_object(job_obj, now)
    st.observe(snapshot, runner_status)
    st.decided(decision, now)
    st.condition("Ready", "True", "Running", "batches commit", )
    body = st.body()            # validated against the StreamJobStatus model, camelCase

Conditions keep their ``lastTransitionTime`` while their status does not change, and carry the
``observedGeneration`` of the spec they were computed from.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from contracts.history import ScalingHistory
from contracts.runner_api import RunnerStatus
from contracts.streamjob import ActionIntent, StreamJobStatus
from controller.core import Decision, MetricsSnapshot

Obj = dict[str, Any]

PHASE_FOR_ACTION = {"scale": "Scaling", "repartition": "Repartitioning", "recover": "Recovering"}


def rfc3339(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _round(v: float | None) -> float | None:
    """Three significant figures: rates that wobble in the 4th digit need not rewrite status."""
    if v is None:
        return None
    return float(f"{v:.3g}")


class StatusDraft:
    """The next status of one StreamJob, built up step by step from the current one."""

    def __init__(self, current: Obj, generation: int | None, now: float) -> None:
        self.doc: Obj = dict(current)
        self.generation = generation
        self.now = now
        self.doc["observedGeneration"] = generation

    @staticmethod
    def from_object(obj: Obj, now: float) -> StatusDraft:
        return StatusDraft(
            dict(obj.get("status") or {}), (obj.get("metadata") or {}).get("generation"), now
        )

    # --- reading ------------------------------------------------------------------------------

    def history(self) -> ScalingHistory:
        raw = self.doc.get("history")
        if not raw:
            return ScalingHistory()
        try:
            return ScalingHistory.model_validate(raw)
        except ValueError:  # a hand-edited or older status: start afresh, do not fail the job
            return ScalingHistory()

    def intent(self) -> ActionIntent | None:
        raw = self.doc.get("intent")
        return ActionIntent.model_validate(raw) if raw else None

    # --- writing ------------------------------------------------------------------------------

    def phase(self, phase: str) -> None:
        self.doc["phase"] = phase

    def set_history(self, history: ScalingHistory) -> None:
        self.doc["history"] = history.model_dump(by_alias=True, exclude_none=True, mode="json")

    def set_intent(self, intent: ActionIntent | None) -> None:
        if intent is None:
            self.doc.pop("intent", None)
        else:
            self.doc["intent"] = intent.model_dump(by_alias=True, exclude_none=True, mode="json")

    def observe(self, snap: MetricsSnapshot | None, runner: RunnerStatus | None) -> None:
        """Rates, lag, executors, partitions and batches, from the snapshot and /status."""
        execs = dict(self.doc.get("executors") or {})
        if runner is not None:
            ex = runner.executors
            execs["current"] = ex.live if ex.live is not None else execs.get("current")
            if ex.target is not None:
                execs["target"] = ex.target
            for key, value in (
                ("partitions", runner.partitions),
                ("lastCommittedBatch", runner.last_committed_batch),
                ("resumedFromBatch", runner.resumed_from_batch),
            ):
                if value is not None:
                    self.doc[key] = value
        if snap is not None and snap.observed_at is not None:
            if snap.executors is not None:
                execs["current"] = snap.executors
            if snap.target_executors is not None and "target" not in execs:
                execs["target"] = snap.target_executors
            for key, figure in (
                ("inputRate", snap.arrival_rate),
                ("processedRate", snap.processed_rate),
                ("lagSeconds", snap.backlog_age_seconds),
                ("backlogRecords", snap.backlog_records),
            ):
                if figure is not None:
                    self.doc[key] = _round(figure)
            if snap.backlog_records is not None:  # a gone driver's backlog is aged from here
                self.doc["backlogObservedAt"] = round(snap.observed_at, 3)
            if snap.last_committed_batch is not None:
                self.doc.setdefault("lastCommittedBatch", snap.last_committed_batch)
        self._executors(execs)

    def target(self, executors: int | None = None, partitions: int | None = None) -> None:
        execs = dict(self.doc.get("executors") or {})
        if executors is not None:
            execs["target"] = executors
        self._executors(execs)

    def _executors(self, execs: Obj) -> None:
        self.doc["executors"] = execs
        cur, tgt = execs.get("current"), execs.get("target")
        shown = ("?" if cur is None else str(cur), "?" if tgt is None else str(tgt))
        self.doc["executorsDisplay"] = "/".join(shown)

    def decided(self, d: Decision) -> None:
        self.doc["lastDecision"] = {
            "time": round(self.now, 3),
            "action": d.action.value,
            "reason": d.reason.value,
            "message": d.message,
            "targetExecutors": d.target_executors,
            "targetPartitions": d.target_partitions,
            "enforced": d.enforced,
        }
        kind = d.diagnosis.kind.value
        op = d.diagnosis.operator
        self.doc["bottleneck"] = f"{op}:{kind}" if op and kind != "None" else kind

    def condition(self, type_: str, status: str, reason: str, message: str) -> None:
        conds = [dict(c) for c in self.doc.get("conditions") or []]
        old = next((c for c in conds if c.get("type") == type_), None)
        since = (
            old["lastTransitionTime"]
            if old is not None and old.get("status") == status
            else rfc3339(self.now)
        )
        new = {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message[:1024],
            "lastTransitionTime": since,
            "observedGeneration": self.generation,
        }
        self.doc["conditions"] = [c for c in conds if c.get("type") != type_] + [new]

    def body(self) -> Obj:
        """The status to write, checked against the model (a bug here must not reach etcd)."""
        model = StreamJobStatus.model_validate(
            {k: v for k, v in self.doc.items() if v is not None}
        )
        return model.model_dump(by_alias=True, exclude_none=True, mode="json")

    def changed_from(self, current: Obj) -> bool:
        return self.body() != StatusDraft(current, self.generation, self.now).body_or_empty()

    def body_or_empty(self) -> Obj:
        try:
            return self.body()
        except ValueError:
            return {}
