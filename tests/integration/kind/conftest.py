"""Starts the kind tier's cluster once the session knows the tier will run (cluster.py)."""

from __future__ import annotations

import os

import pytest

from tests.integration.kind.cluster import TIER


def pytest_collection_finish(session: pytest.Session) -> None:
    here = os.path.dirname(__file__)
    if session.config.option.collectonly:
        return
    if os.geteuid() == 0 and any(str(item.path).startswith(here) for item in session.items):
        TIER.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    TIER.stop()  # a no-op once the tier's fixture deleted it (stop() is idempotent)
