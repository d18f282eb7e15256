"""``stream-autoscaler controller``: the Kubernetes controller.

Usage::

    stream-autoscaler controller [--namespace NS] [--leader-elect]
        [--prometheus-url URL] [--workers N] [--health-port N] [--metrics-port N] [--bind ADDR]

In a cluster it uses the pod's ServiceAccount; elsewhere ``$KUBECONFIG``. With ``--namespace``
it needs RBAC in that namespace only (the chart's ``rbac.scope: namespaced``; docs/security.md).
Without ``--prometheus-url`` (or ``$STREAM_AUTOSCALER_PROMETHEUS_URL``) each runner's /metrics
is scraped directly. Logs are JSON lines (structlog) at ``$STREAM_AUTOSCALER_LOG_LEVEL``.
Exit codes: 0 stopped by a signal, 1 the Lease was lost, 2 bad arguments or no cluster.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import replace

import structlog

from controller.kube.settings import ControllerSettings, LeaderSettings


def configure_logging(level: str) -> None:
    lvl = getattr(logging, level.upper(), logging.INFO)
    logging.basicConfig(level=lvl, format="%(message)s", stream=sys.stderr)
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--namespace", help="watch one namespace (default: all)")
    p.add_argument("--leader-elect", action="store_true",
                   help="act only while holding the Lease (run several replicas safely)")
    p.add_argument("--lease-namespace", help="namespace of the Lease (default: $POD_NAMESPACE)")
    p.add_argument("--identity", help="this instance in the Lease (default: $POD_NAME)")
    p.add_argument("--prometheus-url", default=os.environ.get("STREAM_AUTOSCALER_PROMETHEUS_URL"),
                   help="query runners' metrics here (default: scrape runners directly)")
    p.add_argument("--workers", type=int, default=4, help="reconcile threads")
    p.add_argument("--health-port", type=int, help="/healthz port (default: $..._HEALTH_PORT)")
    p.add_argument("--metrics-port", type=int, help="/metrics port (default: $..._METRICS_PORT)")
    p.add_argument("--bind", default="0.0.0.0", help="address of /healthz and /metrics")
    p.add_argument("--attach-allow-host", action="append", default=[], metavar="SUFFIX",
                   help="also allow attached runners' URLs on hosts ending so (repeatable; "
                        "default: in-cluster Services, .svc and .svc.cluster.local)")


def main(args: argparse.Namespace) -> int:
    configure_logging(os.environ.get("STREAM_AUTOSCALER_LOG_LEVEL", "info"))
    from kubernetes.config import ConfigException

    from controller.kube.api import KubeApi
    from controller.kube.manager import Manager

    s = ControllerSettings(namespace=args.namespace, prometheus_url=args.prometheus_url,
                           workers=args.workers, bind=args.bind)
    leader = LeaderSettings(enabled=args.leader_elect)
    if args.lease_namespace:
        leader = replace(leader, lease_namespace=args.lease_namespace)
    if args.identity:
        leader = replace(leader, identity=args.identity)
    s = replace(s, leader=leader)
    if args.health_port is not None:
        s = replace(s, health_port=args.health_port)
    if args.metrics_port is not None:
        s = replace(s, metrics_port=args.metrics_port)
    if args.attach_allow_host:
        s = replace(s, attach_allowed_hosts=(*s.attach_allowed_hosts, *args.attach_allow_host))
    from controller.kube.network_policy import DriverIngress

    try:  # the drivers' NetworkPolicy peers: refuse a bad chart value now, not per job
        DriverIngress.from_environment()
    except ValueError as e:
        print(f"stream-autoscaler controller: {e}", file=sys.stderr)
        return 2
    try:
        api = KubeApi.from_environment(pool_size=s.workers * 2 + 4)
    except ConfigException as e:
        print(f"stream-autoscaler controller: no cluster to talk to: {e}", file=sys.stderr)
        return 2
    return Manager(api, s).run()
