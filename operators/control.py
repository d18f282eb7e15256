"""The runner's HTTP/JSON control endpoint (bearer token, loopback unless told otherwise).

Usage::

    server = ControlServer(runner, token=load_token(args), host="127.0.0.1", port=8081)
    server.start()                      # a daemon thread; server.port is the bound port
    ...
    server.stop()

The routes, bodies and answers are declared in :mod:`contracts.runner_api` (``Route``, the
request models, ``ActionAnswer``, ``BadRequest``, ``ConflictResponse``, ``RunnerStatus``): POST
answers 202 with the action id and ``/status`` shows its progress; a known ``actionId`` answers
200 (``"duplicate": true``) and starts nothing; 409 while another action runs; 400 naming the
field; 401 without the token.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contracts.runner_api import (
    KIND_OF,
    MAX_BODY_BYTES,
    TOKEN_ENV,
    ActionAnswer,
    ErrorResponse,
    HealthResponse,
    Phase,
    RequestError,
    Route,
    WireModel,
    parse_request,
)
from operators.actions import ActionConflict

if TYPE_CHECKING:
    from operators.runner import JobRunner

_ANSWERED = object()
"""What :meth:`_Handler._body` returns once it has answered (413, 400)."""
SOCKET_TIMEOUT_SECONDS = 10.0
"""A request (headers and body) must arrive within this: a slow drip is cut, not held."""
MAX_CONNECTIONS = 16
"""Requests served at once; more are answered 503 at once. The controller sends one at a time
per job, a human a few: 60 held connections used to hold 60 threads."""


def load_token(token: str | None = None, token_file: str | Path | None = None) -> str:
    """The bearer token: ``token``, else ``$STREAM_AUTOSCALER_TOKEN``, else the file's content;
    if the file does not exist, a new random token is written to it (mode 0600)."""
    # Stripped as the controller strips what it reads from the Secret: a Secret made from a file
    # ending in a newline must not give 401 forever.
    if token and token.strip():
        return token.strip()
    if os.environ.get(TOKEN_ENV, "").strip():
        return os.environ[TOKEN_ENV].strip()
    if token_file is None:
        raise ValueError(f"no token: pass --token-file, or set {TOKEN_ENV}")
    path = Path(token_file)
    if path.exists():
        value = path.read_text(encoding="utf-8").strip()
        if not value:
            raise ValueError(f"token file {path} is empty")
        return value
    value = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(value + "\n")
    return value


class ControlServer:
    """A ThreadingHTTPServer in a daemon thread, bound to one runner."""

    def __init__(self, runner: JobRunner, token: str, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        handler = type("Handler", (_Handler,), {"runner": runner, "token": token.strip()})
        self.httpd = _BoundedServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.host, self.port = host, int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="control",
                                        daemon=True)

    def start(self) -> ControlServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _BoundedServer(ThreadingHTTPServer):
    """A thread per request, at most MAX_CONNECTIONS at once; the rest get 503 and are closed."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                b"Connection: close\r\n\r\n")
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class _Handler(BaseHTTPRequestHandler):
    runner: JobRunner
    token: str
    server_version = "stream-autoscaler"
    timeout = SOCKET_TIMEOUT_SECONDS  # StreamRequestHandler sets it on the socket

    def log_message(self, format: str, *args: Any) -> None:  # quiet: structlog logs actions
        pass

    def do_GET(self) -> None:
        if self.path == Route.HEALTHZ:
            phase = self.runner.phase
            ok = phase != Phase.FAILED
            self._send(200 if ok else 503, HealthResponse(ok=ok, phase=phase))
        elif self.path == Route.STATUS:
            if self._authorized():
                self._send(200, self.runner.status())
        else:
            self._send(404, ErrorResponse(error=f"no route GET {self.path}"))

    def do_POST(self) -> None:
        kind = KIND_OF.get(self.path)
        if kind is None:
            self._send(404, ErrorResponse(error=f"no route POST {self.path}"))
            return
        if not self._authorized():
            return
        body = self._body()
        if body is _ANSWERED:
            return
        try:
            request = parse_request(kind, body)
            before = self.runner.find_action(request.action_id)
            action = self.runner.submit(request)
        except RequestError as e:
            self._send(400, e.response())
        except ActionConflict as e:
            self._send(409, e.answer)
        else:
            self._send(200 if before is not None else 202,
                       ActionAnswer.of(action, self.runner.phase, duplicate=before is not None))

    def _authorized(self) -> bool:
        header = self.headers.get("Authorization", "")
        given = header[7:].strip() if header.startswith("Bearer ") else ""
        if given and hmac.compare_digest(given.encode(), self.token.encode()):
            return True
        self._send(401, ErrorResponse(error="missing or wrong bearer token"),
                   {"WWW-Authenticate": "Bearer"})
        return False

    def _body(self) -> Any:
        """The parsed JSON body (any JSON value: the request model checks it), or
        :data:`_ANSWERED` after answering 413 or 400."""
        header = (self.headers.get("Content-Length") or "0").strip()
        if not header.isdigit() or not header.isascii():  # "-1", "abc", "1e3": not a length
            self._send(400, RequestError(
                "body", f"Content-Length ({header[:20]!r}): a non-negative integer").response())
            return _ANSWERED
        length = int(header)
        if length > MAX_BODY_BYTES:
            self._send(413, ErrorResponse(error="body too large"))
            return _ANSWERED
        raw = self.rfile.read(length) if length else b"{}"
        if len(raw) < length:
            self._send(400, RequestError("body", "body: shorter than Content-Length").response())
            return _ANSWERED
        try:
            return json.loads(raw or b"{}")
        except RecursionError:
            self._send(400, RequestError("body", "body: JSON nested too deeply").response())
            return _ANSWERED
        except ValueError as e:
            self._send(400, RequestError("body", f"body: not JSON ({e})").response())
            return _ANSWERED

    def _send(self, code: int, payload: WireModel,
              headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload.to_wire(), default=str).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
