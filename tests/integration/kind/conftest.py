"""Starts the kind tier's cluster once the session knows the tier will run (cluster.py), about
when it is needed: at the start of the tier that runs just before it in the session (alone: at
once). Up in ~4 minutes, the cluster then idles at ~0.12 of a core (its control plane, three
kubelets, the chart's controllers) until the tier's first test; started at the end of
collection it idled ~12 minutes, ~85 CPU-s taken from both lanes; started with the tier
before it, ~5 (docs/benchmark.md, "The suite warm in 38.8 minutes")."""

from __future__ import annotations

import os

import pytest

from tests.integration.kind.cluster import TIER
from tests.timing import tier_of


class _StartAt:
    """Starts the cluster as the test ``nodeid`` starts. A plugin, not this conftest's hook:
    a conftest's runtest hooks fire only for the items under its directory."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid

    def pytest_runtest_logstart(self, nodeid: str, location: object) -> None:
        if nodeid == self.nodeid:
            TIER.start()


def pytest_collection_finish(session: pytest.Session) -> None:
    here = os.path.dirname(__file__)
    if session.config.option.collectonly or os.geteuid() != 0:
        return
    first = next((i for i, item in enumerate(session.items)
                  if str(item.path).startswith(here)), None)
    if first is None:
        return
    if first == 0:
        TIER.start()
        return
    before = tier_of(session.items[first - 1].nodeid)
    start = first - 1
    while start > 0 and tier_of(session.items[start - 1].nodeid) == before:
        start -= 1
    session.config.pluginmanager.register(_StartAt(session.items[start].nodeid),
                                          "kind-tier-start")


def pytest_sessionfinish(session: pytest.Session) -> None:
    TIER.stop()  # a no-op once the tier's fixture deleted it (stop() is idempotent)
