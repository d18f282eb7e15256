"""Leader election on a coordination.k8s.io Lease, with the kubernetes client's own elector.

Usage::

    elector = LeaderElector(settings.leader, on_started=manager.lead, on_stopped=manager.abdicate)
    elector.start()          # a daemon thread; on_started runs once the Lease is ours

Only the leader reconciles; standbys keep their caches warm. A leader that cannot renew for
``renew_deadline_seconds`` calls ``on_stopped`` and must stop acting at once (the manager
exits the process, as controller-runtime does); a standby takes over after the Lease expires,
within ``lease_duration_seconds``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import structlog
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from controller.kube.settings import LeaderSettings

log = structlog.get_logger("stream_autoscaler.leader")
logging.getLogger("leaderelection").setLevel(logging.WARNING)  # it logs every retry at INFO


class LeaderElector:
    def __init__(
        self, settings: LeaderSettings, on_started: Callable[[], None],
        on_stopped: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.leading = threading.Event()
        self._on_started = on_started
        self._on_stopped = on_stopped
        lock = LeaseLock(settings.lease_name, settings.lease_namespace, settings.identity)
        self._config = electionconfig.Config(
            lock,
            lease_duration=settings.lease_duration_seconds,
            renew_deadline=settings.renew_deadline_seconds,
            retry_period=settings.retry_period_seconds,
            onstarted_leading=self._started,
            onstopped_leading=self._stopped,
        )
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)

    def start(self) -> None:
        log.info("leader_election", lease=f"{self.settings.lease_namespace}/"
                 f"{self.settings.lease_name}", identity=self.settings.identity)
        self._thread.start()

    def _run(self) -> None:
        leaderelection.LeaderElection(self._config).run()

    def _started(self) -> None:
        log.info("leading", identity=self.settings.identity)
        self.leading.set()
        self._on_started()

    def _stopped(self) -> None:
        log.warning("lost_lease", identity=self.settings.identity)
        self.leading.clear()
        self._on_stopped()
