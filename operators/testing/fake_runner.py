"""Many cheap simulated runners behind one HTTP server on loopback, for controller benchmarks.

    .venv/bin/python -m operators.testing.fake_runner --jobs 1000 [--port 0] [--token T]
        [--ready-file F] [--duration 3600]

or, in a test::

    runners = FakeRunners(3, token="t").start()      # jobs job-0000..job-0002
    RunnerClient(runners.url("job-0000"), "t").set_executors(4)
    ScrapeSource(runners.metrics_url).snapshot("job-0000", Window(30), time.time())
    assert runners.counts()["job-0000"]["executors"] == 1; runners.stop()

Each job answers under ``/r/<job>/`` exactly as one runner's control endpoint does
(contracts/runner_api.py): ``GET healthz`` (no token), ``GET status``,
``POST executors {"target": n}``, ``POST repartition {"partitions": n}``, ``POST stop``, and
``GET metrics`` with the runner's series (contracts/metric_names.py; every one promql.py queries).
Actions are idempotent by ``"actionId"`` (the current action and the last 16): a repeat answers
200 with ``"duplicate": true`` and starts nothing.

The model per job is deliberately cheap: a square-wave input rate with a per-job phase, a read
stage and a keyed stage run one after another on ``executors x cores`` slots (the keyed stage
capped by its state partitions, the read stage by the source partitions), a backlog integrating
arrival minus processed, and counters advanced lazily by elapsed time whenever a job is asked.
Actions take simulated time, then change the model. It ignores state stickiness and executor
registration delay beyond ``scale_seconds``. Exposition is string formatting, no registries.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from contracts.runner_api import (
    MAX_BODY_BYTES,
    ActionKind,
    ErrorResponse,
    HealthResponse,
    Phase,
    RequestError,
    Route,
    WireModel,
)
from operators.testing.fake_runner_model import FakeJob, ModelConfig

__all__ = ["FakeJob", "FakeRunners", "ModelConfig"]

DEFAULT_DURATION_SECONDS = 3600.0
"""The CLI stops by itself after this, so a forgotten benchmark does not hold a port for ever."""
STOP_POLL_SECONDS = 0.05
"""How often the server loop checks for stop(): tests start and stop servers by the dozen, and
the stdlib's 0.5 s would dominate their time; 20 wake-ups/s cost nothing measurable."""


class FakeRunners:
    """N fake runners behind one ThreadingHTTPServer on ``host`` (see the module docstring)."""

    def __init__(self, jobs: int | Sequence[str], token: str | dict[str, str] = "fake-token",
                 config: ModelConfig | None = None, port: int = 0, host: str = "127.0.0.1",
                 clock: Callable[[], float] = time.time) -> None:
        names = [f"job-{i:04d}" for i in range(jobs)] if isinstance(jobs, int) else list(jobs)
        self.config = config or ModelConfig()
        self.clock = clock
        now = clock()
        golden = 0.6180339887
        self.jobs = {
            name: FakeJob(name, token if isinstance(token, str) else token[name], self.config,
                          phase_offset=(i * golden % 1.0) * self.config.period_seconds, now=now)
            for i, name in enumerate(names)
        }
        handler = type("Handler", (_Handler,), {"runners": self})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.host, self.port = host, int(self.httpd.server_address[1])
        self.requests = 0
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="fake-runners",
                                        args=(STOP_POLL_SECONDS,), daemon=True)

    def start(self) -> FakeRunners:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def url(self, job: str) -> str:
        """The job's control endpoint base (RunnerClient's ``base_url``)."""
        return f"http://{self.host}:{self.port}/r/{job}"

    def metrics_url(self, job: str) -> str:
        return self.url(job) + "/metrics"

    def counts(self) -> dict[str, dict[str, int]]:
        """Per job: actions started by kind (``executors``), and refused as ``<kind>.duplicate``,
        ``<kind>.conflict`` (409) or ``<kind>.invalid`` (400)."""
        out = {}
        for name, job in self.jobs.items():
            with job.lock:
                out[name] = dict(job.counts)
        return out

    def job(self, name: str) -> FakeJob:
        """The job's model, advanced to now (for assertions; hold no reference across calls)."""
        job = self.jobs[name]
        with job.lock:
            job.advance(self.clock())
        return job


class _Handler(BaseHTTPRequestHandler):
    runners: FakeRunners
    protocol_version = "HTTP/1.1"  # keep-alive: a controller's Session reuses its connection
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall
    server_version = "stream-autoscaler-fake"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _route(self) -> tuple[FakeJob | None, str]:
        parts = self.path.split("/")
        if len(parts) != 4 or parts[0] or parts[1] != "r":
            return None, ""
        return self.runners.jobs.get(parts[2]), parts[3]

    def do_GET(self) -> None:
        self.runners.requests += 1
        job, route = self._route()
        if job is None or "/" + route not in (Route.HEALTHZ, Route.STATUS, "/metrics"):
            self._send(404, ErrorResponse(error=f"no route GET {self.path}"))
            return
        if "/" + route == Route.HEALTHZ:
            with job.lock:
                job.advance(self.runners.clock())
                ok = job.phase != Phase.FAILED
            self._send(200 if ok else 503, HealthResponse(ok=ok, phase=job.phase))
        elif "/" + route == Route.STATUS and self._authorized(job):
            with job.lock:
                job.advance(self.runners.clock())
                st = job.status()
            self._send(200, st)
        elif route == "metrics":
            with job.lock:
                job.advance(self.runners.clock())
                text = job.metrics()
            self._reply(200, text.encode(), "text/plain; version=0.0.4; charset=utf-8")

    def do_POST(self) -> None:
        self.runners.requests += 1
        job, route = self._route()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if 0 < length <= MAX_BODY_BYTES else b""
        kind = next((k for k in ActionKind if k.value == route), None)
        if job is None or kind is None:
            self._send(404, ErrorResponse(error=f"no route POST {self.path}"))
            return
        if length > MAX_BODY_BYTES:
            self._send(413, ErrorResponse(error="body too large"))
            return
        if not self._authorized(job):
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError as e:
            self._send(400, RequestError("body", f"body: not JSON ({e})").response())
            return
        with job.lock:
            job.advance(self.runners.clock())
            code, answer = job.submit(kind, body)
        self._send(code, answer)

    def _authorized(self, job: FakeJob) -> bool:
        if self.headers.get("Authorization", "") == f"Bearer {job.token}":
            return True
        self._send(401, ErrorResponse(error="missing or wrong bearer token"),
                   {"WWW-Authenticate": "Bearer"})
        return False

    def _send(self, code: int, payload: WireModel,
              headers: dict[str, str] | None = None) -> None:
        self._reply(code, json.dumps(payload.to_wire()).encode(), "application/json", headers)

    def _reply(self, code: int, data: bytes, content_type: str,
               headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--token", default="fake-token")
    ap.add_argument("--ready-file", type=Path)
    ap.add_argument("--duration", type=float, default=DEFAULT_DURATION_SECONDS)
    args = ap.parse_args(argv)
    runners = FakeRunners(args.jobs, token=args.token, port=args.port, host=args.host).start()
    ready = {"port": runners.port, "url": f"http://{runners.host}:{runners.port}",
             "jobs": args.jobs, "pathPrefix": "/r/<job>/"}
    if args.ready_file:
        tmp = args.ready_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(ready))
        tmp.replace(args.ready_file)  # readers never see a half-written file
    print(json.dumps(ready), flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        time.sleep(args.duration)
    runners.stop()
    print(json.dumps({"requests": runners.requests}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
