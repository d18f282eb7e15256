"""The controller process: informers -> work queue -> workers, gated by leader election.

Usage::

    mgr = Manager(KubeApi.from_environment(), ControllerSettings(namespace="jobs"))
    mgr.run()        # blocks until SIGTERM/SIGINT (or the Lease is lost: exit code 1)

Watch events put a job's key in the queue; after each pass the key is re-added after the
policy's evaluation interval (the per-job timer), so a job is evaluated on time even when no
event arrives. A failed pass is retried with per-key exponential backoff. A ScalingPolicy
change re-queues every job that references it.
"""

from __future__ import annotations

import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import structlog

from controller.adapters.prometheus import PrometheusSource, SnapshotSource
from controller.kube.api import ApiConflict, KubeApi
from controller.kube.controller_metrics import ControllerMetrics
from controller.kube.informer import Informer, key_of
from controller.kube.leader import LeaderElector
from controller.kube.reconciler import Key, Reconciler, Target
from controller.kube.settings import ControllerSettings
from controller.kube.workqueue import WorkQueue

log = structlog.get_logger("stream_autoscaler.manager")
Obj = dict[str, Any]


class Manager:
    """Runs the informers, the queue and the workers of one controller instance."""

    def __init__(self, api: KubeApi, settings: ControllerSettings) -> None:
        self.api = api
        self.settings = settings
        self.metrics = ControllerMetrics()
        self.queue = WorkQueue(settings.queue)
        self.jobs = Informer(
            "StreamJob", api.jobs(settings.namespace), self._on_job, settings.informer,
            on_restart=lambda why: self.metrics.watch_restarts.labels("StreamJob", why).inc(),
        )
        self.policies = Informer(
            "ScalingPolicy", api.policies(settings.namespace), self._on_policy,
            settings.informer,
            on_restart=lambda why: self.metrics.watch_restarts.labels("ScalingPolicy", why).inc(),
        )
        self._prometheus = (
            PrometheusSource(settings.prometheus_url) if settings.prometheus_url else None
        )
        self._sources: dict[Key, tuple[str, SnapshotSource]] = {}
        self._marks: dict[Key, tuple[Any, ...]] = {}
        self.reconciler = Reconciler(
            api, settings, self.jobs.get, self.policies.get, self._source_for, self.metrics
        )
        self.stopping = threading.Event()
        self.lost_lease = False
        self._workers: list[threading.Thread] = []
        self._health: ThreadingHTTPServer | None = None

    # --- events -------------------------------------------------------------------------------

    def _on_job(self, kind: str, obj: Obj) -> None:
        """Queues a job when its spec, deletion or finalizers change. Status-only updates (our
        own writes) do not: the per-job timer paces evaluations, not our echo."""
        self.metrics.jobs.set(len(self.jobs))
        key = key_of(obj)
        meta = obj.get("metadata") or {}
        mark = (meta.get("generation"), meta.get("deletionTimestamp"),
                tuple(meta.get("finalizers") or ()))
        if kind == "DELETED":
            self._sources.pop(key, None)
            self._marks.pop(key, None)
        elif self._marks.get(key) == mark:
            return
        else:
            self._marks[key] = mark
        self.queue.add(key)

    def _on_policy(self, kind: str, obj: Obj) -> None:
        ns, name = key_of(obj)
        for key in self.jobs.list_keys():
            job = self.jobs.get(key)
            ref = (((job or {}).get("spec") or {}).get("policyRef") or {}).get("name", "default")
            if key[0] == ns and ref == name:
                self.queue.add(key)

    def _source_for(self, key: Key, target: Target) -> SnapshotSource:
        if self._prometheus is not None:
            return self._prometheus
        cached = self._sources.get(key)
        if cached is None or cached[0] != target.metrics_url:
            from controller.adapters.scrape import ScrapeSource

            url = target.metrics_url

            def metrics_url(_job: str, url: str = url) -> str:
                return url

            cached = (url, ScrapeSource(metrics_url))
            self._sources[key] = cached
        return cached[1]

    # --- workers ------------------------------------------------------------------------------

    def _work(self) -> None:
        while not self.stopping.is_set():
            key = self.queue.get(timeout=1.0)
            if key is None:
                continue
            try:
                self._pass(key)  # type: ignore[arg-type]
            finally:
                self.queue.done(key)
            self.metrics.queue_depth.set(len(self.queue))

    def _pass(self, key: Key) -> None:
        try:
            after = self.reconciler.reconcile(key)
        except ApiConflict as e:  # our cache was stale: retry from the newer object soon
            self.metrics.reconciles.labels("conflict").inc()
            log.info("conflict", job=f"{key[0]}/{key[1]}", error=str(e))
            self.queue.add_rate_limited(key)
            return
        except Exception as e:
            self.metrics.reconciles.labels("error").inc()
            self.metrics.error(type(e).__name__)
            delay = self.queue.add_rate_limited(key)
            log.warning("reconcile_failed", job=f"{key[0]}/{key[1]}", error=_describe(e),
                        retry_in=round(delay, 2))
            self.reconciler.report_failure(key, e)  # Degraded + Event, not only a log line
            return
        self.metrics.reconciles.labels("ok").inc()
        self.queue.forget(key)
        if after is not None:
            self.queue.add_after(key, after)

    def lead(self) -> None:
        """Start acting: the workers take keys from now on."""
        self.metrics.leader.set(1)
        for key in self.jobs.list_keys():
            self.queue.add(key)
        for i in range(self.settings.workers):
            t = threading.Thread(target=self._work, name=f"worker-{i}", daemon=True)
            t.start()
            self._workers.append(t)

    def abdicate(self) -> None:
        """The Lease is lost: stop acting now; the process exits with 1."""
        self.metrics.leader.set(0)
        self.lost_lease = True
        self.stopping.set()

    # --- the process --------------------------------------------------------------------------

    def start(self) -> None:
        self.jobs.start()
        self.policies.start()
        self._serve_health()
        self.metrics.serve(self.settings.metrics_port, self.settings.bind)
        if not (self.jobs.wait_synced(60) and self.policies.wait_synced(60)):
            raise RuntimeError("the StreamJob/ScalingPolicy caches did not sync within 60 s")
        if self.settings.leader.enabled:
            LeaderElector(self.settings.leader, self.lead, self.abdicate).start()
        else:
            self.lead()

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stopping.set())
        self.start()
        log.info("controller_started", namespace=self.settings.namespace or "(all)",
                 metrics="prometheus" if self._prometheus else "direct scrape",
                 leader_election=self.settings.leader.enabled)
        while not self.stopping.wait(1.0):
            pass
        self.stop()
        return 1 if self.lost_lease else 0

    def stop(self) -> None:
        self.stopping.set()
        self.queue.shutdown()
        self.jobs.stop()
        self.policies.stop()
        deadline = time.monotonic() + 10
        for t in self._workers:
            t.join(max(0.0, deadline - time.monotonic()))
        if self._health is not None:
            self._health.shutdown()

    def _serve_health(self) -> None:
        mgr = self

        class Health(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                ok = not mgr.stopping.is_set() and self.path in ("/healthz", "/readyz")
                body = b"ok" if ok else b"stopping"
                self.send_response(200 if ok else 503)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._health = ThreadingHTTPServer((self.settings.bind, self.settings.health_port),
                                           Health)
        self._health.daemon_threads = True
        threading.Thread(target=self._health.serve_forever, name="health", daemon=True).start()


def _describe(e: Exception) -> str:
    """An API error as its status and the API server's message, not the whole HTTP dump."""
    from kubernetes.client.exceptions import ApiException

    if isinstance(e, ApiException):
        import json

        try:
            msg = json.loads(e.body or "{}").get("message") or e.reason
        except ValueError:
            msg = e.reason
        return f"HTTP {e.status}: {msg}"
    return f"{type(e).__name__}: {e}"[:500]
