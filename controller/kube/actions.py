"""Carrying a decision out through the runner, intent first, and following it to its end.

Usage (by the reconciler)::

    actions = Actions(settings, metrics, write=reconciler.write, event=reconciler.event,
                      recover=delete_driver_pod)
    after = actions.start(obj, draft, client, decision, snapshot, history)   # intent -> runner
    after = actions.follow(obj, draft, client, intent)                       # later passes

An intent (action id, targets) reaches status before the runner hears of it. Each runner step
carries its own id (``<id>-x`` executors, then ``<id>`` repartition), and the runner keeps its
recent actions by id, so a step is sent at most once whatever restarts in between: a restarted
controller asks the runner about the id and follows it, sends a step the runner never got, or
abandons an intent older than ``intent_timeout_seconds``. The engine's actions and the runner's
action kinds differ: :func:`steps` maps one to the other (the table is in
:mod:`contracts.runner_api`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from contracts.history import HistoryLimits, ScalingHistory
from contracts.runner_api import ActionKind, ActionState, Phase, RunnerStatus
from contracts.streamjob import ActionIntent
from controller.adapters.runner_client import RunnerClient, RunnerRefused, RunnerUnavailable
from controller.core import Action, Decision, MetricsSnapshot, action_entry
from controller.kube.controller_metrics import ControllerMetrics
from controller.kube.settings import ControllerSettings
from controller.kube.status import PHASE_FOR_ACTION, StatusDraft

Obj = dict[str, Any]

STATUS_HISTORY = HistoryLimits(max_entries=90, max_age_seconds=900.0)
"""History kept in status: 90 entries (15 min of 10 s evaluations) bound the object's size
(~15 kB) while covering the scale-down stabilization window, cooldown and restart budgets."""


class Actions:
    """The intent lifecycle of one controller process."""

    def __init__(
        self,
        settings: ControllerSettings,
        metrics: ControllerMetrics,
        write: Callable[[Obj, StatusDraft], Obj],
        event: Callable[..., None],
        recover: Callable[[Obj], None],
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.write = write
        self.event = event
        self.recover = recover
        self._followed: set[str] = set()
        """Intents this process started or has already picked up (the others were left in
        flight by a previous controller instance)."""

    def start(
        self, obj: Obj, draft: StatusDraft, client: RunnerClient, d: Decision,
        snap: MetricsSnapshot, history: ScalingHistory,
    ) -> float:
        intent = ActionIntent(
            action_id=f"{obj['metadata']['uid'][:8]}-{uuid.uuid4().hex[:8]}",
            action=d.action.value,
            target_executors=d.target_executors,
            target_partitions=d.target_partitions,
            max_records_per_batch=d.max_records_per_batch,
            started_at=draft.now,
        )
        draft.set_intent(intent)
        draft.phase(PHASE_FOR_ACTION.get(d.action.value, "Scaling"))
        draft.target(executors=d.target_executors)
        draft.condition("Progressing", "True", d.reason.value, d.message)
        # the action enters the history with the intent (cooldown, ineffective-move checks);
        # a refusal takes both back
        draft.set_history(with_action(history, intent, d, snap))
        # 1. the intent reaches etcd before anything changes (a 409 here: nothing was done)
        obj = self.write(obj, draft)
        self.event(obj, "Normal", d.reason.value, d.message, d.action.value)
        self.metrics.action(d.action.value, "started", 0.0)
        self._followed.add(intent.action_id)
        # 2. the first step goes to the runner under the intent's id
        return self._advance(obj, draft, client, intent, try_status(client), refusal_ends=True,
                             history_before=history)

    # --- an action in flight ------------------------------------------------------------------

    def follow(
        self, obj: Obj, draft: StatusDraft, client: RunnerClient, intent: ActionIntent,
    ) -> float:
        runner = try_status(client)
        draft.observe(None, runner)
        if intent.action_id not in self._followed:
            self._followed.add(intent.action_id)
            self.event(obj, "Normal", "ActionResumed",
                        f"{intent.action} {intent.action_id} was in flight "
                        f"({draft.now - intent.started_at:.0f} s) when the previous controller "
                        "stopped: following it to its end (never sending a step twice)")
        if intent.action == Action.RECOVER:
            if runner is not None and runner.phase == Phase.RUNNING:
                return self._end(obj, draft, intent, "succeeded", "", runner)
            if draft.now - intent.started_at >= self.settings.intent_timeout_seconds:
                return self._end(obj, draft, intent, "abandoned",
                                        "the driver did not come back", runner)
            draft.phase("Recovering")
            self.write(obj, draft)
            return self.settings.action_poll_seconds
        return self._advance(obj, draft, client, intent, runner, refusal_ends=False)

    def _advance(
        self, obj: Obj, draft: StatusDraft, client: RunnerClient, intent: ActionIntent,
        runner: RunnerStatus | None, refusal_ends: bool,
        history_before: ScalingHistory | None = None,
    ) -> float:
        """Moves an intent one step on: each step is a runner action under its own id, sent
        only if the runner does not know that id (so a restarted controller never repeats it)."""
        age = draft.now - intent.started_at
        if intent.action == Action.RECOVER:
            self.recover(obj)
            draft.phase("Recovering")
            self.write(obj, draft)
            return self.settings.action_poll_seconds
        for step_id, kind, value in steps(intent):
            record = runner.find_action(step_id) if runner else None
            if record is None:
                if age >= self.settings.intent_timeout_seconds:
                    # too old to send now: the job has moved on since it was decided
                    why = "the runner did not answer" if runner is None else (
                        f"the runner never received step {step_id}")
                    return self._end(obj, draft, intent, "abandoned", why, runner)
                if runner is None:
                    self.write(obj, draft)
                    return self.settings.action_poll_seconds
                try:
                    if kind == ActionKind.EXECUTORS:
                        client.set_executors(value, step_id)
                    else:
                        client.repartition(value, step_id, intent.max_records_per_batch)
                except (RunnerRefused, RunnerUnavailable) as e:
                    if refusal_ends or age >= self.settings.intent_timeout_seconds:
                        if history_before is not None:
                            draft.set_history(history_before)
                        return self._end(obj, draft, intent, "refused", str(e), runner)
                    self.write(obj, draft)
                    return self.settings.action_poll_seconds
                self.write(obj, draft)
                return self.settings.action_poll_seconds
            state = record.state
            if state == ActionState.RUNNING:
                draft.phase(PHASE_FOR_ACTION.get(intent.action, "Scaling"))
                self.write(obj, draft)
                return self.settings.action_poll_seconds
            if state != ActionState.SUCCEEDED:
                return self._end(obj, draft, intent, "failed",
                                        f"{kind}: {record.error or state}", runner)
        return self._end(obj, draft, intent, "succeeded", "", runner)

    def _end(
        self, obj: Obj, draft: StatusDraft, intent: ActionIntent, outcome: str, detail: str,
        runner: RunnerStatus | None,
    ) -> float:
        draft.set_intent(None)
        draft.observe(None, runner)
        draft.phase("Running" if runner and runner.phase == Phase.RUNNING else "Degraded")
        took = draft.now - intent.started_at
        msg = f"{intent.action} {intent.action_id} {outcome} after {took:.0f} s"
        if detail:
            msg += f": {detail}"
        ok = outcome == "succeeded"
        draft.condition("Progressing", "False", "ActionSucceeded" if ok else "ActionFailed", msg)
        self.write(obj, draft)
        self.metrics.action(intent.action, outcome, took)
        self.event(obj, "Normal" if ok else "Warning",
                    "ActionSucceeded" if ok else f"Action{outcome.capitalize()}", msg)
        return self.settings.action_poll_seconds


# --- runner steps -----------------------------------------------------------------------


def try_status(client: RunnerClient) -> RunnerStatus | None:
    """The runner's status, or None when it cannot be had (unknown, not an error)."""
    try:
        return client.status()
    except (RunnerUnavailable, RunnerRefused):
        return None


def steps(intent: ActionIntent) -> list[tuple[str, ActionKind, int]]:
    """The runner actions of an intent, in order, each with its own id: where the engine's
    actions (``controller.core.Action``) become the runner's (``contracts.runner_api.ActionKind``).

    ==============  =======================================================================
    engine          runner steps
    ==============  =======================================================================
    ``scale``       ``executors`` under the intent's id
    ``repartition`` ``executors`` under ``<id>-x`` when the executors change too (they
                    register while the query runs), then ``repartition`` under the id (stop
                    at a batch boundary, repartition onto them, resume with the intent's
                    ``maxRecordsPerBatch``, the admission cap)
    ``recover``     none: the driver pod is restarted (``Actions.recover``)
    ==============  =======================================================================

    Deleting a StreamJob sends ``stop`` (:func:`stop_runner`)."""
    steps: list[tuple[str, ActionKind, int]] = []
    if intent.action == Action.SCALE:
        steps.append((intent.action_id, ActionKind.EXECUTORS, int(intent.target_executors or 0)))
    elif intent.action == Action.REPARTITION:
        if intent.target_executors is not None:
            steps.append((f"{intent.action_id}-x", ActionKind.EXECUTORS,
                          int(intent.target_executors)))
        steps.append((intent.action_id, ActionKind.REPARTITION,
                      int(intent.target_partitions or 1)))
    return steps


def stop_runner(client: RunnerClient, timeout: float) -> str:
    """Asks the runner to stop at a batch boundary and waits until it has. A runner busy with an
    action (409) is asked again until that action ends; the id makes the ask idempotent."""
    deadline = time.monotonic() + timeout
    sent = False
    while time.monotonic() < deadline:
        if not sent:
            try:
                client.stop(action_id="finalizer-stop")
                sent = True
            except RunnerUnavailable as e:
                return f"not confirmed (runner unreachable: {e})"
            except RunnerRefused as e:
                if e.status != 409:
                    return f"not confirmed ({e})"
        st = try_status(client)
        if st is None:  # the runner exits once stopped
            return "stopped" if sent else "not confirmed (runner gone)"
        if st.phase == Phase.STOPPED:
            return "stopped"
        if st.phase == Phase.FAILED:
            return "not confirmed (the query had failed)"
        time.sleep(1.0)
    return f"not confirmed within {timeout:g} s"


def with_action(
    history: ScalingHistory, intent: ActionIntent, d: Decision, snap: MetricsSnapshot,
) -> ScalingHistory:
    """``history`` with ``d`` carried out as of the intent's start: the same entry as every host
    records (``controller.core.action_entry``), within the status bounds."""
    entry = action_entry(
        d, intent.started_at, snap.processed_rate, snap.executors, snap.backlog_age_seconds
    )
    return history.add(entry, intent.started_at, STATUS_HISTORY)
