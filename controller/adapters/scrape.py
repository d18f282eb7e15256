"""MetricsSnapshot by scraping a runner's ``/metrics`` directly: the fallback with no Prometheus.

Usage::

    urls = {"wordcount": "http://10.0.0.7:9108/metrics"}
    source = ScrapeSource(urls.get)                        # job name -> /metrics URL (or None)
    snap = source.snapshot("wordcount", Window(60), now=time.time())

Each :meth:`ScrapeSource.snapshot` scrapes once, keeps the job's series in a bounded ring of
``(time, samples)`` and evaluates every query of :mod:`controller.adapters.promql` over the ring
with Prometheus' semantics (:data:`SCALAR_RULES`, :data:`PER_OPERATOR_RULES`,
:data:`PER_STATE_OPERATOR_RULES`; a unit test keeps them in step with promql.py):

* ``increase``/``rate`` over ``[w]``: Prometheus' ``extrapolatedRate`` over the scrapes in
  ``(now - w, now]`` — last minus first with counter resets added back, extrapolated to the window
  edges when the samples reach them; a series with fewer than two samples gives nothing.
* ``avg_over_time(...[a])``, ``max(...)`` of the latest scrape, ``time() - max(...)``, sums and
  maxima by ``(operator, kind)`` / ``operator``, and the ``_sum``/``_count`` rate ratios.

The ring only grows when :meth:`snapshot` is called, so the controller's evaluation interval is
the scrape interval. **The first evaluation after start (or after a restart of the controller)
is blind**: one scrape gives no window rates (``processed_rate``, ``batches``, busy times are
``None``), so the engine holds with InsufficientData until the second. Unknown is never zero: an
unreachable runner, an HTTP error or an unparseable answer gives a snapshot with no data and
``unavailable`` naming the URL and the error, so the engine holds and says why (whether the
driver is dead is for the controller to learn from the pod, not from one failed scrape). NaN,
Inf and negative results are ``None``, as on the Prometheus path. Only series whose ``job``
label is the StreamJob's name are read, so a runner exporting another job's series mixes nothing.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import requests
import structlog
from prometheus_client.parser import text_string_to_metric_families

from contracts import metric_names as M
from contracts.metric_names import Metric
from controller.adapters.prometheus import assemble_snapshot
from controller.adapters.promql import Window
from controller.core.snapshot import MetricsSnapshot
from controller.errors import ControllerError

log = structlog.get_logger(__name__)

SCRAPE_TIMEOUT_SECONDS = 3.0
"""A runner renders /metrics in about a millisecond; 3 s means it is gone or wedged, and a
controller evaluating 1,000 jobs cannot wait longer on one (Prometheus' default is 10 s with a
15 s interval; we scrape on the evaluation path)."""
MAX_SCRAPES_PER_JOB = 240
"""Ring bound in scrapes, besides the window: a 20-minute window at a 5 s evaluation interval.
Keeps memory flat (~1,000 jobs x 240 x ~60 series) if a caller evaluates far more often."""
EXTRAPOLATION_THRESHOLD = 1.1
"""Prometheus' factor: extrapolate to a window edge only when it is within 1.1 average sample
intervals of the first/last sample (as ``extrapolatedRate`` does)."""

Function = Literal["up", "max", "increase", "rate", "rate_ratio", "avg_over_arrival", "age"]
Labels = tuple[tuple[str, str], ...]
"""A series' labels except ``job``, sorted: its identity within one job."""
Samples = dict[str, dict[Labels, float]]
"""One scrape of one job: sample name -> series -> value."""
FetchText = Callable[[str], tuple[int, str]]
"""GET a URL -> (HTTP status, body); raises when the runner cannot be reached."""


@dataclass(frozen=True)
class Rule:
    """How one snapshot field is computed: ``function`` of ``metric`` aggregated ``by`` labels
    (``metric`` None for ``up``: the scrape itself)."""

    metric: Metric | None
    function: Function
    by: tuple[str, ...] = ()

    def samples(self) -> tuple[str, ...]:
        """Exposition sample names this rule reads (a counter's ``_total``, a summary's
        ``_sum`` and ``_count``)."""
        return () if self.metric is None else self.metric.series

    @property
    def sample(self) -> str:
        """The one sample name of a rule over a gauge or a counter."""
        assert self.metric is not None and self.metric.type != "summary", self
        return self.metric.series[0]


SCALAR_RULES: dict[str, Rule] = {
    "driver_up": Rule(None, "up"),
    "arrival_rate": Rule(M.ARRIVAL_RATE, "avg_over_arrival"),
    "processed_rate": Rule(M.INPUT_ROWS, "rate"),
    "batches": Rule(M.BATCHES, "increase"),
    "batch_duration_seconds": Rule(M.BATCH_DURATION, "rate_ratio"),
    "overhead_seconds": Rule(M.BATCH_OVERHEAD, "rate_ratio"),
    "trigger_interval_seconds": Rule(M.TRIGGER_INTERVAL, "max"),
    "backlog_records": Rule(M.BACKLOG_RECORDS, "max"),
    "backlog_age_seconds": Rule(M.BACKLOG_AGE, "max"),
    "executors": Rule(M.EXECUTORS, "max"),
    "cores_per_executor": Rule(M.EXECUTOR_CORES, "max"),
    "target_executors": Rule(M.TARGET_EXECUTORS, "max"),
    "source_partitions": Rule(M.SOURCE_PARTITIONS, "max"),
    "seconds_since_progress": Rule(M.LAST_PROGRESS, "age"),
    "failed_tasks": Rule(M.FAILED_TASKS, "increase"),
    "executors_lost": Rule(M.EXECUTORS_LOST, "increase"),
    "seconds_since_executor_loss": Rule(M.LAST_EXECUTOR_LOSS, "age"),
    "last_committed_batch": Rule(M.LAST_COMMITTED_BATCH, "max"),
    "memory_used_ratio": Rule(M.EXECUTOR_MEMORY_RATIO, "max"),
    "batch_in_flight_seconds": Rule(M.BATCH_IN_FLIGHT_START, "age"),
    "batch_in_flight_rows": Rule(M.BATCH_IN_FLIGHT_ROWS, "max"),
    "last_restart_seconds": Rule(M.LAST_RESTART_SECONDS, "max"),
    "admission_cap_records": Rule(M.ADMISSION_CAP, "max"),
}
"""promql.SCALARS, field by field."""

_STAGE = ("operator", "kind")
PER_OPERATOR_RULES: dict[str, Rule] = {
    "rows": Rule(M.STAGE_ROWS, "increase", _STAGE),
    "busy_seconds": Rule(M.STAGE_BUSY, "increase", _STAGE),
    "wall_seconds": Rule(M.STAGE_WALL, "increase", _STAGE),
    "partitions": Rule(M.STAGE_TASKS, "max", _STAGE),
    "max_task_seconds": Rule(M.STAGE_MAX_TASK, "max", _STAGE),
    "median_task_seconds": Rule(M.STAGE_MEDIAN_TASK, "max", _STAGE),
}
"""promql.PER_OPERATOR, field by field."""

PER_STATE_OPERATOR_RULES: dict[str, Rule] = {
    "state_rows": Rule(M.STATE_ROWS, "max", ("operator",)),
    "state_bytes": Rule(M.STATE_BYTES, "max", ("operator",)),
    "state_memory_bytes": Rule(M.STATE_MEMORY, "max", ("operator",)),
    "state_partitions": Rule(M.STATE_OPERATOR_PARTITIONS, "max", ("operator",)),
}
"""promql.PER_STATE_OPERATOR, field by field."""

_SAMPLE_NAMES = frozenset(
    name
    for rules in (SCALAR_RULES, PER_OPERATOR_RULES, PER_STATE_OPERATOR_RULES)
    for rule in rules.values()
    for name in rule.samples()
)


def parse_exposition(text: str, job: str) -> Samples:
    """The series of ``job`` that the rules read, from Prometheus text exposition.

    Raises ``ValueError`` when the text does not parse."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name not in _SAMPLE_NAMES or s.labels.get("job") != job:
                continue
            labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "job"))
            out.setdefault(s.name, {})[labels] = float(s.value)
    return out


MAX_SCRAPE_BYTES = 8 << 20
"""8 MiB: a runner's exposition is ~20 kB; a 230 MB body once pushed the controller (limit
512 Mi) into an OOM loop that stopped autoscaling for every job."""


class ScrapeTooLarge(ControllerError, ValueError):
    """A /metrics answer larger than MAX_SCRAPE_BYTES, or slower than the deadline."""


def requests_fetch(timeout_seconds: float = SCRAPE_TIMEOUT_SECONDS,
                   max_bytes: int = MAX_SCRAPE_BYTES) -> FetchText:
    """A FetchText over one shared ``requests.Session`` (keep-alive to every runner).

    ``timeout_seconds`` bounds the whole answer, not each socket read (a slow drip of one byte a
    second used to hold a worker for 24 s against a 3 s timeout), and at most ``max_bytes`` are
    read."""
    session = requests.Session()

    def fetch(url: str) -> tuple[int, str]:
        deadline = time.monotonic() + timeout_seconds
        # never a redirect: the host the URL policy allowed is the only host called
        with session.get(url, timeout=timeout_seconds, stream=True, allow_redirects=False) as r:
            body = bytearray()
            # read1: whatever has arrived (iter_content would block until 64 kB or the end,
            # so a drip would never reach the deadline check)
            while chunk := r.raw.read1(65536, decode_content=True):
                body += chunk
                if len(body) > max_bytes:
                    raise ScrapeTooLarge(f"answer larger than {max_bytes:,} bytes")
                if time.monotonic() > deadline:
                    raise ScrapeTooLarge(f"answer not complete within {timeout_seconds:g} s")
            return r.status_code, body.decode(r.encoding or "utf-8", errors="replace")

    return fetch


class ScrapeSource:
    """A ``SnapshotSource`` that scrapes each runner itself (see the module docstring)."""

    def __init__(
        self,
        url_for: Callable[[str], str | None],
        fetch: FetchText | None = None,
        max_scrapes: int = MAX_SCRAPES_PER_JOB,
    ) -> None:
        self.url_for = url_for
        self._fetch = fetch or requests_fetch()
        self.max_scrapes = max_scrapes
        self._rings: dict[str, collections.deque[tuple[float, Samples]]] = {}
        self._lock = threading.Lock()

    def snapshot(self, job: str, window: Window, now: float) -> MetricsSnapshot:
        url = self.url_for(job)
        if not url:
            return MetricsSnapshot(job=job, unavailable=f"no metrics URL known for job {job}")
        try:
            status, text = self._fetch(url)
            if status != 200:
                raise ValueError(f"HTTP {status}")
            samples = parse_exposition(text, job)
        except Exception as e:  # requests errors, HTTP errors, parse errors: all mean "unknown"
            why = f"runner metrics at {url}: {type(e).__name__}: {e}"
            log.warning("scrape_failed", job=job, error=why)
            return MetricsSnapshot(job=job, unavailable=why)
        if not samples:
            return MetricsSnapshot(
                job=job, unavailable=f"runner metrics at {url} have no series with job={job!r}"
            )
        w, _ = _spans(window)
        with self._lock:
            ring = self._rings.setdefault(job, collections.deque(maxlen=self.max_scrapes))
            ring.append((now, samples))
            while ring and ring[0][0] <= now - w:
                ring.popleft()
            scrapes = list(ring)
        return evaluate(job, scrapes, window, now)

    def scrapes(self, job: str) -> list[tuple[float, Samples]]:
        """The job's ring, oldest first (a copy)."""
        with self._lock:
            return list(self._rings.get(job, ()))

    def forget(self, job: str) -> None:
        """Drop a job's ring (its StreamJob was deleted)."""
        with self._lock:
            self._rings.pop(job, None)


def evaluate(
    job: str, scrapes: list[tuple[float, Samples]], window: Window, now: float
) -> MetricsSnapshot:
    """The snapshot the promql queries would give over these scrapes (oldest first; the last
    one is the latest, and succeeded)."""
    w, a = _spans(window)
    ctx = _Range(scrapes, now)
    scalars = {f: _scalar(ctx, rule, w, a) for f, rule in SCALAR_RULES.items()}
    per_op = {f: _grouped(ctx, rule, w) for f, rule in PER_OPERATOR_RULES.items()}
    per_state = {f: _grouped(ctx, rule, w) for f, rule in PER_STATE_OPERATOR_RULES.items()}
    return assemble_snapshot(job, window, now, scalars, per_op, per_state)


def _spans(window: Window) -> tuple[float, float]:
    """``$w`` and ``$a`` in seconds, rounded as :meth:`Window.render` renders them."""
    w = max(1, round(window.window_seconds))
    return float(w), float(max(1, round(min(window.arrival_seconds, window.window_seconds))))


class _Range:
    """The scrapes, and the series of one sample name within a trailing span."""

    def __init__(self, scrapes: list[tuple[float, Samples]], now: float) -> None:
        self.scrapes, self.now = scrapes, now
        self.latest = scrapes[-1][1] if scrapes else {}

    def series(self, name: str, span: float) -> dict[Labels, list[tuple[float, float]]]:
        out: dict[Labels, list[tuple[float, float]]] = {}
        for t, samples in self.scrapes:
            if self.now - span < t <= self.now:
                for labels, v in samples.get(name, {}).items():
                    out.setdefault(labels, []).append((t, v))
        return out


FUTURE_TOLERANCE_SECONDS = 5.0
"""A progress timestamp up to this far ahead of the evaluation time reads as age 0 (the scrape
ran after ``now`` was taken; clocks of runner and controller differ a little); further ahead is
a clock problem and reads as unknown."""


def _finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) and v >= 0 else None


def _scalar(ctx: _Range, rule: Rule, w: float, a: float) -> float | None:
    if rule.function == "up":
        return 1.0 if ctx.scrapes else None
    assert rule.metric is not None
    name = rule.metric.full if rule.metric.type == "summary" else rule.sample
    if rule.function == "max":
        return _finite(_max(ctx.latest.get(name, {}).values()))
    if rule.function == "age":
        latest = _max(ctx.latest.get(name, {}).values())
        if latest is None or not latest > 0:  # a timestamp of 0 is "none" (``> 0`` in PromQL)
            return None
        age = ctx.now - latest
        # ``now`` is taken before the scrape, so a batch that committed during it looks a few
        # milliseconds in the future: that is "just now", not unknown
        return 0.0 if -FUTURE_TOLERANCE_SECONDS < age < 0 else _finite(age)
    if rule.function == "avg_over_arrival":
        series = ctx.series(name, a)
        if len(series) != 1:  # none, or ambiguous (as PrometheusSource reads several series)
            return None
        values = [v for _, v in next(iter(series.values()))]
        return _finite(sum(values) / len(values))
    if rule.function == "rate_ratio":
        num = _sum_counters(ctx, rule.metric.sum, w, True)
        den = _sum_counters(ctx, rule.metric.count, w, True)
        if num is None or den is None or den == 0:  # 0/0 is NaN in PromQL: unknown
            return None
        return _finite(num / den)
    return _finite(_sum_counters(ctx, rule.sample, w, rule.function == "rate"))


def _sum_counters(ctx: _Range, name: str, w: float, is_rate: bool) -> float | None:
    """``sum(rate(name[w]))`` or ``sum(increase(name[w]))``."""
    return _sum(_extrapolated(p, ctx.now, w, is_rate) for p in ctx.series(name, w).values())


def _grouped(ctx: _Range, rule: Rule, w: float) -> dict[tuple[str, str], float]:
    """``sum by``/``max by`` ``rule.by``, keyed ``(operator, kind or "")`` as PrometheusSource's
    ``_by`` keys them; series without ``operator`` and unknown values are left out."""
    groups: dict[tuple[str, str], list[float | None]] = {}
    name = rule.sample
    if rule.function == "max":
        values: Iterable[tuple[Labels, float | None]] = ctx.latest.get(name, {}).items()
    else:
        values = (
            (labels, _extrapolated(p, ctx.now, w, rule.function == "rate"))
            for labels, p in ctx.series(name, w).items()
        )
    for labels, v in values:
        d = dict(labels)
        if "operator" not in d or v is None:
            continue
        key = (d["operator"], d.get("kind", "") if "kind" in rule.by else "")
        groups.setdefault(key, []).append(v)
    out: dict[tuple[str, str], float] = {}
    for key, vs in groups.items():
        v = _max(vs) if rule.function == "max" else _sum(vs)
        finite = _finite(v)
        if finite is not None:
            out[key] = finite
    return out


def _max(values: Iterable[float | None]) -> float | None:
    vs = [v for v in values if v is not None]
    if not vs:
        return None
    return math.nan if any(math.isnan(v) for v in vs) else max(vs)


def _sum(values: Iterable[float | None]) -> float | None:
    vs = [v for v in values if v is not None]
    return sum(vs) if vs else None


def _extrapolated(
    points: list[tuple[float, float]], now: float, span: float, is_rate: bool
) -> float | None:
    """Prometheus' ``extrapolatedRate`` for a counter over ``(now - span, now]``; None with
    fewer than two samples (Prometheus drops the series)."""
    if len(points) < 2:
        return None
    first_t, first_v = points[0]
    last_t, last_v = points[-1]
    result = last_v - first_v
    prev = first_v
    for _, v in points[1:]:
        if v < prev:  # a counter reset: the counter restarted from zero
            result += prev
        prev = v
    sampled = last_t - first_t
    if sampled <= 0:
        return None
    to_start, to_end = first_t - (now - span), now - last_t
    average = sampled / (len(points) - 1)
    if result > 0 and first_v >= 0:  # do not extrapolate the counter below zero
        to_start = min(to_start, sampled * (first_v / result))
    threshold = average * EXTRAPOLATION_THRESHOLD
    interval = sampled
    interval += to_start if to_start < threshold else average / 2
    interval += to_end if to_end < threshold else average / 2
    factor = interval / sampled
    if is_rate:
        factor /= span
    return result * factor
