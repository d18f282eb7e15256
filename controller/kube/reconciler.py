"""Reconcile one StreamJob: collect -> decide -> act, with the intent written first.

Usage::

    r = Reconciler(api, settings, jobs_cache.get, policies_cache.get, sources, metrics)
    requeue_after = r.reconcile(("ns", "job"))   # seconds until the next evaluation, or None

Crash safety: before an action the intent (action id, targets) goes to status;
the runner keeps actions by id. A controller that restarts with an intent in status asks the
runner about that id and follows it to its end, re-sends it if the runner never got it (same id,
so never twice), or abandons it after ``intent_timeout_seconds``. Each step is idempotent.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import structlog
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from contracts.manifests import error_lines
from contracts.pods import lost_with_node, node_of, not_ready_since
from contracts.policy import ScalingPolicy, ScalingPolicySpec
from contracts.runner_api import Phase, RunnerStatus
from contracts.streamjob import CLUSTER_CONTEXT, StreamJob
from controller.adapters.prometheus import SnapshotSource
from controller.adapters.promql import Window
from controller.adapters.runner_client import RunnerClient
from controller.core import (
    Action,
    Decision,
    MetricsSnapshot,
    Reason,
    action_entry,
    evaluate,
    log_fields,
)
from controller.errors import ControllerError
from controller.kube import resources
from controller.kube.actions import STATUS_HISTORY, Actions, stop_runner, try_status
from controller.kube.api import KubeApi, NotFound, NotOwned, owned_by
from controller.kube.attach import secret_problem, url_problem
from controller.kube.controller_metrics import ControllerMetrics
from controller.kube.network_policy import network_policy
from controller.kube.recovery import recovery_from_status, restored_layout
from controller.kube.references import consent_problem, keys_problem, references
from controller.kube.settings import FINALIZER, ControllerSettings, ManagedSettings
from controller.kube.status import StatusDraft

log = structlog.get_logger("stream_autoscaler.reconciler")
Obj = dict[str, Any]
Key = tuple[str, str]

TOKEN_TTL_SECONDS = 60.0
"""How long a runner token read from its Secret is reused: a rotated token is picked up within a
minute, and a 401 meanwhile only delays one evaluation."""

MAX_PROBLEMS = 5
"""Validation errors quoted in a SpecInvalid/PolicyInvalid condition and Event: enough to fix
the usual mistake, short enough to read in ``kubectl describe`` (``validate FILE`` lists all)."""


@dataclass
class Target:
    """Where a job's runner answers, and how it is measured."""

    control_url: str
    metrics_url: str
    token: str
    managed: bool


class Degraded(ControllerError):
    """The job cannot be evaluated as specified (missing policy, invalid spec, no token)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


SourceFactory = Callable[[Key, Target], SnapshotSource]


class Reconciler:
    """Reconciles StreamJobs one key at a time (the manager runs several keys in parallel)."""

    def __init__(
        self,
        api: KubeApi,
        settings: ControllerSettings,
        get_job: Callable[[Key], Obj | None],
        get_policy: Callable[[Key], Obj | None],
        source_for: SourceFactory,
        metrics: ControllerMetrics,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.settings = settings
        self.get_job = get_job
        self.get_policy = get_policy
        self.source_for = source_for
        self.metrics = metrics
        self.clock = clock
        self._clients: dict[Key, tuple[str, str, RunnerClient]] = {}
        self._tokens: dict[tuple[str, str, str], tuple[float, str, Obj]] = {}
        self._local = threading.local()
        self._named_losses: dict[Key, set[tuple[str, float]]] = {}
        """Per job, the lost executors (pod, removedAt) an ExecutorsLost Event has named."""
        self.actions = Actions(settings, metrics, write=self._write, event=self._event,
                               recover=self._recover_managed)

    # --- entry --------------------------------------------------------------------------------

    def reconcile(self, key: Key) -> float | None:
        """One pass over one job; the delay until the next pass (None: forget the job)."""
        self._local.started = time.monotonic()
        obj = self.get_job(key)
        if obj is None:
            self._clients.pop(key, None)
            self._named_losses.pop(key, None)
            return None
        if obj["metadata"].get("deletionTimestamp"):
            return self._finalize(key, obj)
        if FINALIZER not in (obj["metadata"].get("finalizers") or []):
            obj = self.api.set_finalizer(obj, present=True)
        now = self.clock()
        draft = StatusDraft.from_object(obj, now)
        try:
            job, policy = self._parse(key, obj)
            target = self._target(key, obj, job, policy, draft)
        except Degraded as e:
            return self._degraded(obj, draft, e)
        if target is None:  # managed driver not up yet: status says why
            self._write(obj, draft)
            return self.settings.action_poll_seconds * 2
        client = self._client(key, target)
        intent = draft.intent()
        if intent is not None:
            return self.actions.follow(obj, draft, client, intent)
        return self._evaluate(key, obj, draft, client, target, job, policy)

    # --- inputs -------------------------------------------------------------------------------

    def _parse(self, key: Key, obj: Obj) -> tuple[StreamJob, ScalingPolicySpec]:
        try:
            job = StreamJob.model_validate({k: v for k, v in obj.items() if k != "status"},
                                           context={CLUSTER_CONTEXT: True})
        except ValidationError as e:
            raise Degraded("SpecInvalid", _problems(StreamJob, e)) from None
        ref = job.spec.policy_ref.name
        pobj = self.get_policy((key[0], ref))
        if pobj is None:
            raise Degraded(
                "PolicyNotFound", f"ScalingPolicy {key[0]}/{ref} not found: holding as is"
            )
        try:
            policy = ScalingPolicy.model_validate(
                {k: v for k, v in pobj.items() if k != "status"}
            )
        except ValidationError as e:
            raise Degraded(
                "PolicyInvalid", f"ScalingPolicy {key[0]}/{ref}: " + _problems(ScalingPolicy, e)
            ) from None
        return job, policy.spec

    def _target(
        self, key: Key, obj: Obj, job: StreamJob, policy: ScalingPolicySpec, draft: StatusDraft
    ) -> Target | None:
        attach = job.spec.attach
        if attach is not None:
            allowed = self.settings.attach_allowed_hosts
            for field, url in (("spec.attach.controlUrl", attach.control_url),
                               ("spec.attach.metricsUrl", attach.metrics_url)):
                if (problem := url_problem(field, url, allowed)) is not None:
                    raise Degraded("RunnerUrlNotAllowed", problem)
            token = ""
            if attach.token_secret_ref is not None:
                ref = attach.token_secret_ref
                try:
                    token = self._token(key[0], ref.name, ref.key, obj)
                except NotFound as e:
                    raise Degraded("TokenSecretNotFound", str(e)) from None
            return Target(attach.control_url, attach.metrics_url, token, managed=False)
        return self._ensure_managed(key, obj, job, policy, draft)

    def _token(self, namespace: str, name: str, key: str, job: Obj) -> str:
        """A Secret's token, re-read at most every TOKEN_TTL_SECONDS (one GET per job per
        evaluation would double the controller's API traffic); only from a Secret meant for it
        (controller/kube/attach.py), else Degraded TokenSecretNotAllowed."""
        k = (namespace, name, key)
        cached = self._tokens.get(k)
        now = time.monotonic()
        if cached is None or now - cached[0] > TOKEN_TTL_SECONDS:
            meta, data = self.api.secret(namespace, name)
            if key not in data:
                raise NotFound(f"Secret {namespace}/{name} has no key {key!r}")
            cached = (now, data[key].strip(), meta)
            self._tokens[k] = cached
        if (problem := secret_problem(cached[2], job)) is not None:
            raise Degraded("TokenSecretNotAllowed", problem)
        return cached[1]

    def _check_references(self, namespace: str, obj: Obj, job: StreamJob) -> None:
        """Each claim, Secret and ConfigMap the spec names exists, holds the keys the pods read
        and is meant for StreamJobs (controller/kube/references.py), before the driver pod is
        made: else Degraded naming it (not a pod waiting in ContainerCreating, nor a mount of
        what the job author may not hand to a job)."""
        uid = obj["metadata"].get("uid", "")
        for ref in references(job):
            # the script's ConfigMap keeps the reason it has always had
            missing = "ApplicationNotFound" if ref.kind == "ConfigMap" else "ReferenceNotFound"
            try:
                meta, keys = self.api.referenced(ref.kind, namespace, ref.name)
            except NotFound:
                raise Degraded(missing, f"{ref.field}: {ref.kind} {namespace}/{ref.name} "
                               "not found") from None
            if (problem := keys_problem(ref, namespace, keys)) is not None:
                raise Degraded(missing, problem)
            if (problem := consent_problem(ref, namespace, meta, uid)) is not None:
                raise Degraded("ReferenceNotAllowed", problem)

    def _ensure_managed(
        self, key: Key, obj: Obj, job: StreamJob, policy: ScalingPolicySpec, draft: StatusDraft
    ) -> Target | None:
        s = self.settings.managed
        names = resources.Names.of(obj)
        if key[0] == s.controller_namespace:
            raise Degraded(
                "ControllerNamespace",
                f"managed jobs never run in the controller's namespace {key[0]}: its driver runs "
                "the job's code beside the controller's ServiceAccount; create the StreamJob in "
                "one of the chart's jobNamespaces (docs/security.md)",
            )
        try:
            return self._ensure_owned(key, obj, job, policy, draft, s, names)
        except NotOwned as e:
            raise Degraded("NotOwned", str(e)) from None

    def _ensure_owned(
        self, key: Key, obj: Obj, job: StreamJob, policy: ScalingPolicySpec, draft: StatusDraft,
        s: ManagedSettings, names: resources.Names,
    ) -> Target | None:
        """The managed job's objects, each created or found owned by it (else NotOwned)."""
        sec = self.api.ensure("Secret", key[0], resources.secret(obj))
        self.api.ensure("Secret", key[0], resources.spark_auth_secret(obj))
        token = self.api.secret_value(key[0], names.secret, resources.TOKEN_KEY) if not (
            sec.get("data") or {}
        ).get(resources.TOKEN_KEY) else _b64(sec["data"][resources.TOKEN_KEY])
        b = policy.executors
        start = b.initial if b.initial is not None else job.spec.executors.initial
        executors = (draft.doc.get("executors") or {}).get("target") or min(
            max(start, b.min), b.max
        )
        pod = self.api.read_pod(key[0], names.driver)
        if pod is not None and not owned_by(pod, obj["metadata"].get("uid", "")):
            raise NotOwned("Pod", key[0], names.driver)  # never adopted, never deleted
        if pod is not None and lost_with_node(pod, draft.now):
            self._driver_node_lost(obj, draft, job, names, pod)
            return None
        pod_phase = ((pod or {}).get("status") or {}).get("phase")
        recovery: Decision | None = None
        intent = draft.intent()
        if pod is None and draft.doc.get("lastCommittedBatch") is not None and (
            intent is None or intent.action != Action.RECOVER.value
        ):
            # the driver pod vanished (deleted, evicted, its node lost) with no recovery of ours
            # in flight: recovery as scale-out, sized by the engine to drain the outage
            recovery = recovery_from_status(draft, policy, key[1], names.driver,
                                            job.spec.trigger.interval_seconds)
        executors, partitions, cap = restored_layout(intent, recovery, executors)
        manifest = resources.runner_manifest(job, names, s, executors)
        want = resources.config_map(obj, manifest, s)
        cm = self.api.ensure("ConfigMap", key[0], want)
        data = want["data"]
        if (cm.get("data") or {}) != data:
            self.api.update_config_map_data(key[0], names.config_map, data)
        self.api.ensure("Service", key[0], resources.service(obj, s))
        self.api.ensure("NetworkPolicy", key[0], network_policy(obj, s))
        if pod is None or pod_phase in ("Failed", "Succeeded"):
            recovering = pod is not None or draft.doc.get("lastCommittedBatch") is not None
            if pod is not None:  # ended: remove it; the next pass starts a new one
                self.api.delete_pod(key[0], names.driver)
                draft.phase("Recovering")
                draft.condition("Ready", "False", "DriverEnded",
                                f"driver pod ended ({pod_phase}); restarting it")
                return None
            self._check_references(key[0], obj, job)
            try:
                self.api.ensure(
                    "Pod", key[0],
                    resources.driver_pod(obj, job, s, executors, policy.executors.max,
                                         partitions, cap),
                )
            except ApiException as e:
                if e.status not in (403, 422):
                    raise
                raise Degraded("DriverPodRejected", f"driver pod {names.driver}: "
                               f"{_api_message(e)}") from None
            draft.phase("Recovering" if recovering else "Pending")
            draft.target(executors=executors)
            draft.condition("Ready", "False", "DriverStarting",
                            f"driver pod {names.driver} created with {executors} executor(s)")
            if recovery is not None:
                draft.decided(recovery)
                if recovery.enforced:  # in the history: the restart budget, the cooldown
                    draft.set_history(draft.history().add(
                        action_entry(recovery, draft.now, draft.doc.get("processedRate")),
                        draft.now, STATUS_HISTORY))
            if recovering:
                why = f": {recovery.message}" if recovery is not None else ""
                self._event(obj, "Warning", "RecoverFromFailure",
                            f"driver pod {names.driver} was gone; recreated from the latest "
                            f"checkpoint with {executors} executor(s){why}")
            return None
        if pod_phase != "Running":
            draft.phase("Pending")
            draft.condition("Ready", "False", "DriverPending", f"driver pod is {pod_phase}")
            return None
        return Target(names.control_url(s), names.metrics_url(s), token, managed=True)

    def _driver_node_lost(self, obj: Obj, draft: StatusDraft, job: StreamJob,
                          names: resources.Names, pod: Obj) -> None:
        """The driver pod's node stopped reporting (:func:`contracts.pods.lost_with_node`): a
        graceful delete would never complete and the pod's name would stay taken, so it is
        force-deleted and the next pass recreates it on a node that reports, from the latest
        checkpoint, sized to catch up (``recovery_from_status``). Safe only where the checkpoint
        fences a driver that comes back with its node: a filesystem checkpoint's lock
        (``operators.state.checkpoint.CheckpointLock``: the new runner refuses to start while the
        old one holds it, and the kernel frees it when the old process dies). An object store
        has no such lock: then the job waits, Degraded, for Kubernetes or a person to remove the
        pod once the node is known down (``tests/unit/kube/test_driver_node_lost.py``)."""
        node, since = node_of(pod), not_ready_since(pod) or draft.now
        lost = (f"driver pod {names.driver} on node {node} has not been Ready for "
                f"{draft.now - since:.0f} s: its node is lost")
        if job.spec.checkpoint.on_object_store:
            raise Degraded("DriverNodeLost", f"{lost}; the checkpoint on an object store has no "
                           "lock to fence the old driver should the node come back, so the pod "
                           "is left to Kubernetes: delete it with --force once the node is "
                           "known down (or delete the Node)")
        self.api.delete_pod(names.namespace, names.driver, grace_seconds=0)
        draft.phase("Recovering")
        draft.condition("Ready", "False", "DriverNodeLost", lost)
        self._event(obj, "Warning", "DriverNodeLost",
                    f"{lost}; force-deleted, to be recreated on a node that reports from the "
                    "latest checkpoint (its lock fences the old driver should the node return)")

    def _client(self, key: Key, t: Target) -> RunnerClient:
        cached = self._clients.get(key)
        if cached is None or cached[:2] != (t.control_url, t.token):
            cached = (t.control_url, t.token, RunnerClient(t.control_url, t.token))
            self._clients[key] = cached
        return cached[2]

    # --- evaluate and act ---------------------------------------------------------------------

    def _evaluate(
        self, key: Key, obj: Obj, draft: StatusDraft, client: RunnerClient, target: Target,
        job: StreamJob, policy: ScalingPolicySpec,
    ) -> float:
        started = getattr(self._local, "started", time.monotonic())
        runner = try_status(client)
        source = self.source_for(key, target)
        name = (runner.job if runner is not None else None) or key[1]

        def collect(window_seconds: float, now: float) -> MetricsSnapshot:
            return source.snapshot(str(name), Window(window_seconds), now)

        # the history in status holds the decision as not carried out; actions.start adds the
        # action with the intent, and a refusal puts this one back
        ev = evaluate(collect, policy, draft.history(), draft.now, STATUS_HISTORY)
        decision, snap, history = ev.decision, ev.snapshot, ev.history
        draft.observe(snap, runner)
        draft.decided(decision)
        draft.set_history(history)
        self.metrics.decision(decision, policy)
        self._loss_event(key, obj, decision, runner, draft.now - (
            policy.timing.window_seconds + policy.lag.catch_up_seconds))
        after = policy.timing.evaluation_interval_seconds
        if decision.acts and decision.action is Action.RECOVER and not target.managed:
            decision = decision.model_copy(update={"enforced": False})
            ev = replace(ev, decision=decision)
            draft.decided(decision)
            self._degraded_note(obj, draft, "AttachedRunnerDown",
                                f"{decision.message}; the runner at {target.control_url} is not "
                                "owned by the controller: restart it from its checkpoint")
            self._write(obj, draft)
        elif decision.acts:
            after = self.actions.start(obj, draft, client, decision, snap, history)
        else:
            phase = "Running" if runner and runner.phase == Phase.RUNNING else (
                "Degraded" if snap.observed_at is None else "Running")
            draft.phase(phase)
            ready = phase == "Running"
            draft.condition("Ready", "True" if ready else "False",
                            "Running" if ready else decision.reason.value,
                            decision.message)
            draft.condition("Degraded", "False", "AsExpected", "")
            self._write(obj, draft)
            self._refusal_event(obj, decision)
        took = time.monotonic() - started
        self.metrics.evaluated(took)
        log.info("decision", job=f"{key[0]}/{key[1]}", **log_fields(ev), ms=round(took * 1000, 1))
        return after

    # --- degraded, deletion -------------------------------------------------------------------

    def _recover_managed(self, obj: Obj) -> None:
        names = resources.Names.of(obj)
        pod = self.api.read_pod(names.namespace, names.driver)
        if pod is not None and owned_by(pod, obj["metadata"].get("uid", "")):
            self.api.delete_pod(names.namespace, names.driver)

    def report_failure(self, key: Key, error: Exception) -> None:
        """A pass that raised (the manager retries with backoff): Degraded ``ReconcileFailed``
        with the error, and an Event when it starts. Best effort: the API server may be what
        failed, and then only the log says so."""
        obj = self.get_job(key)
        if obj is None:
            return
        what = f"{type(error).__name__}: {str(error)[:300]}"
        try:
            draft = StatusDraft.from_object(copy.deepcopy(obj), self.clock())
            self._degraded(obj, draft, Degraded("ReconcileFailed", f"reconcile failed ({what}); "
                                                "retrying with backoff"))
        except Exception as e:
            log.warning("degraded_not_recorded", job=f"{key[0]}/{key[1]}", error=str(e))

    def _degraded(self, obj: Obj, draft: StatusDraft, e: Degraded) -> float:
        was: Obj = next((c for c in draft.doc.get("conditions") or []
                         if c.get("type") == "Degraded"), {})
        self._degraded_note(obj, draft, e.reason, e.message, event=False)
        self._write(obj, draft)  # first the status, so a 409 here does not repeat the Event
        if was.get("reason") != e.reason or was.get("status") != "True":
            self._event(obj, "Warning", e.reason, e.message)
        self.metrics.error("degraded")
        return self.settings.default_interval_seconds

    def _degraded_note(self, obj: Obj, draft: StatusDraft, reason: str, message: str,
                       event: bool = True) -> None:
        draft.phase("Degraded")
        draft.condition("Degraded", "True", reason, message)
        draft.condition("Ready", "False", reason, message)
        if event:
            self._event(obj, "Warning", reason, message)

    def _finalize(self, key: Key, obj: Obj) -> float | None:
        if FINALIZER not in (obj["metadata"].get("finalizers") or []):
            return None
        spec = obj.get("spec") or {}
        attach = spec.get("attach")
        try:
            if attach:  # the same rules as every pass: no token to a URL or from a Secret
                url = attach["controlUrl"]  # the job may not name (controller/kube/attach.py)
                if (problem := url_problem("spec.attach.controlUrl", url,
                                           self.settings.attach_allowed_hosts)) is not None:
                    raise NotFound(problem)
                ref = attach.get("tokenSecretRef")
                token = self._token(key[0], ref["name"], ref.get("key", "token"), obj) \
                    if ref else ""
            else:
                names = resources.Names.of(obj)
                token = self.api.secret_value(key[0], names.secret, resources.TOKEN_KEY)
                url = names.control_url(self.settings.managed)
            outcome = stop_runner(RunnerClient(url, token), self.settings.stop_timeout_seconds)
        except (NotFound, Degraded) as e:
            outcome = f"not confirmed: {e}"
        self._event(obj, "Normal" if outcome == "stopped" else "Warning", "Stopped",
                    f"query {outcome} at a batch boundary before deletion")
        self.api.set_finalizer(obj, present=False)
        self._clients.pop(key, None)
        return None

    # --- writes -------------------------------------------------------------------------------

    def _write(self, obj: Obj, draft: StatusDraft) -> Obj:
        body = draft.body()
        if body == (obj.get("status") or {}):
            return obj
        new = self.api.replace_status(obj, body)
        obj.clear()
        obj.update(new)  # later writes in this pass start from the new resourceVersion
        return obj

    def _event(self, obj: Obj, type_: str, reason: str, message: str, action: str = "") -> None:
        try:
            self.api.event(obj, type_, reason, message, action)
            self.metrics.event(type_, reason)
        except Exception as e:  # an Event lost must not lose the action
            log.warning("event_failed", reason=reason, error=f"{type(e).__name__}: {e}")

    def _loss_event(self, key: Key, obj: Obj, d: Decision, runner: RunnerStatus | None,
                    since: float) -> None:
        """A Warning Event naming the nodes whose executors were lost (the runner's
        ``lostExecutors`` removed after ``since``), once per lost executor, with what the
        engine decided on this pass.

        The runner's report is the fact, whatever the engine decided: its window may lag the
        loss (metrics are scraped, ``/status`` is read), a pass may find ``/status`` down, and
        another step may decide first (a scale-out on the backlog the hung batch left). So each
        loss is named at the first pass that reads it, and remembered per job, not by the last
        decision's reason. A new leader names a loss still inside ``since`` once more.
        Held by tests/unit/kube/test_loss_event.py and the kind tier's lost-worker story."""
        if runner is None:
            return  # /status down: the next pass that reads it names the loss
        named = self._named_losses.setdefault(key, set())
        recent = [e for e in runner.lost_executors if e.removed_at >= since]
        named.intersection_update((e.pod, e.removed_at) for e in recent)  # settled: forgotten
        new = [e for e in recent if (e.pod, e.removed_at) not in named]
        if not new:
            return
        by_node: dict[str, list[str]] = {}
        for e in new:
            by_node.setdefault(e.node, []).append(e.executor_id)
        lost = "; ".join(f"node {node} lost: executor(s) {', '.join(ids)} removed by the runner"
                         for node, ids in sorted(by_node.items()))
        then = d.message if d.reason is Reason.EXECUTORS_LOST else \
            f"{d.reason.value}: {d.message}"
        self._event(obj, "Warning", Reason.EXECUTORS_LOST.value, f"{lost}. {then}")
        named.update((e.pod, e.removed_at) for e in new)

    def _refusal_event(self, obj: Obj, d: Decision) -> None:
        last = ((obj.get("status") or {}).get("lastDecision") or {}).get("reason")
        if d.reason.refuses and d.reason.value != last:
            self._event(obj, "Warning", d.reason.value, d.message)


# --- helpers ------------------------------------------------------------------------------------


def _problems(model: type[StreamJob] | type[ScalingPolicy], e: ValidationError) -> str:
    """The lines ``stream-autoscaler validate`` prints for the same mistake, on one line."""
    return "; ".join(error_lines(model, e)[:MAX_PROBLEMS])


def _api_message(e: ApiException) -> str:
    import json

    try:
        return str(json.loads(e.body or "{}").get("message") or e.reason)
    except ValueError:
        return str(e.reason)


def _b64(v: str) -> str:
    import base64

    return base64.b64decode(v).decode().strip()
