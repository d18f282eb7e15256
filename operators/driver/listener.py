"""Spark's streaming query listener, feeding :class:`operators.driver.exporter.RunnerMetrics`.

Usage (the runner, once per session)::

    spark.streams.addListener(ProgressListener(metrics, backlog_fn, poller, on_progress))

It runs on Spark's listener thread: it only parses the event, sets gauges through the metrics
and hands a batch id to the :class:`~operators.driver.stages.StagePoller`; any error is swallowed,
because a listener that raises must never break the query.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

from pyspark.sql.streaming.listener import StreamingQueryListener

from operators.driver.exporter import RunnerMetrics
from operators.driver.stages import StagePoller
from operators.sources.base import SourceBacklog


class ProgressListener(StreamingQueryListener):
    """Feeds :class:`RunnerMetrics` from ``onQueryProgress`` and ``onQueryIdle``; errors feed
    the failure counter."""

    def __init__(self, metrics: RunnerMetrics,
                 backlog: Callable[[dict[str, Any]], SourceBacklog | None],
                 poller: StagePoller | None = None,
                 on_progress: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.metrics, self.backlog, self.poller, self.on_progress = (
            metrics, backlog, poller, on_progress)

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        try:
            p = json.loads(event.progress.json)
            try:
                backlog = self.backlog(p)
            except Exception:
                backlog = None
            self.metrics.observe_progress(p, backlog)
            if self.poller is not None and p.get("numInputRows"):
                self.poller.submit(int(p["batchId"]))
            if self.on_progress is not None:
                self.on_progress(p)
        except Exception:  # a listener must never break the query
            pass

    def onQueryIdle(self, event: Any) -> None:
        with contextlib.suppress(Exception):  # a listener must never break the query
            self.metrics.observe_idle()

    def onQueryTerminated(self, event: Any) -> None:
        if getattr(event, "exception", None):
            self.metrics.failures.labels(self.metrics.job).inc()
