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
import io
import json
import os
import secrets
import selectors
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
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
from operators.driver.actions import ActionConflict

if TYPE_CHECKING:
    from operators.driver.runner import JobRunner

_ANSWERED = object()
"""What :meth:`_Handler._body` returns once it has answered (413, 400)."""
REQUEST_DEADLINE_SECONDS = 10.0
"""A whole request (headers and body) must arrive within this from its connection's accept: a
drip of one byte a second is cut at the deadline, however often it sends (a per-read timeout
never cut it)."""
MAX_CONNECTIONS = 16
"""Requests served at once (their headers complete); more are answered 503 at once. The
controller sends one at a time per job, a human a few."""
MAX_PENDING = 256
"""Connections whose headers have not all arrived. They cost no thread (one selector reads
them all), so a flood of slow, unauthenticated connections holds no worker; past this many the
newest is answered 503 and closed."""
MAX_HEAD_BYTES = 16 * 1024
"""Request line and headers; longer is answered 431 (the standard library's own limits are
per line: 64 KiB, 100 headers)."""
LISTEN_BACKLOG = 512
"""Connections the kernel queues before the selector accepts them: a burst of a thousand
connects waits in the queue for a moment instead of timing out (the standard library's 5 left a
quarter of such a burst waiting over 30 s)."""
_SERVICE_UNAVAILABLE = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                        b"Connection: close\r\n\r\n")
_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
              b"Connection: close\r\n\r\n")


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
    """The control endpoint, bound to one runner: one selector thread accepts connections and
    reads their request heads without a thread each; ``/healthz`` is answered there at once,
    every other request by a worker thread (at most :data:`MAX_CONNECTIONS`), each connection
    within :data:`REQUEST_DEADLINE_SECONDS` of its accept and closed after its answer
    (tests/unit/operators/driver/test_control_endpoint.py holds each bound)."""

    def __init__(self, runner: JobRunner, token: str, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self.runner = runner
        self._handler = type("Handler", (_Handler,), {"runner": runner, "token": token.strip()})
        self._listener = socket.create_server((host, port), backlog=LISTEN_BACKLOG)
        self._listener.setblocking(False)
        self.host, self.port = host, int(self._listener.getsockname()[1])
        self._selector = selectors.DefaultSelector()
        self._pending: dict[socket.socket, tuple[float, bytearray, Any]] = {}
        self._closing: dict[socket.socket, float] = {}
        self._workers = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="control", daemon=True)

    def start(self) -> ControlServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():  # bound before the runner started, maybe never served
            self._thread.join(timeout=5)
        for conn in list(self._pending):
            self._drop(conn)
        for conn in list(self._closing):
            self._close(conn)
        self._selector.close()
        self._listener.close()

    # --- the selector thread: accepts, reads heads, answers /healthz, hands the rest over ---

    def _serve(self) -> None:
        self._selector.register(self._listener, selectors.EVENT_READ)
        while not self._stopping.is_set():
            for key, _ in self._selector.select(timeout=0.2):
                if key.fileobj is self._listener:
                    self._accept()
                elif key.fileobj in self._closing:
                    self._linger(key.fileobj)
                else:
                    self._read(key.fileobj)  # type: ignore[arg-type]
            now = time.monotonic()
            for conn, (deadline, _, _) in list(self._pending.items()):
                if now > deadline:  # headers never completed: cut, no answer owed
                    self._drop(conn)
            for conn, until in list(self._closing.items()):
                if now > until:
                    self._close(conn)

    def _accept(self) -> None:
        while True:
            try:
                conn, address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # EMFILE and the like: the kernel keeps the rest queued
                return
            if len(self._pending) >= MAX_PENDING:
                self._refuse(conn, _SERVICE_UNAVAILABLE)
                continue
            conn.setblocking(False)
            self._pending[conn] = (time.monotonic() + REQUEST_DEADLINE_SECONDS, bytearray(),
                                   address)
            self._selector.register(conn, selectors.EVENT_READ)

    def _read(self, conn: socket.socket) -> None:
        deadline, head, address = self._pending[conn]
        try:
            chunk = conn.recv(MAX_HEAD_BYTES + 4 - len(head))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(conn)
            return
        head += chunk
        if b"\r\n\r\n" not in head and b"\n\n" not in head:
            if len(head) > MAX_HEAD_BYTES:
                self._unregister(conn)
                self._refuse(conn, _TOO_LARGE)
            return
        self._unregister(conn)
        if head.startswith(b"GET " + Route.HEALTHZ.encode() + b" "):
            self._healthz(conn)
        elif not self._workers.acquire(blocking=False):
            self._refuse(conn, _SERVICE_UNAVAILABLE)
        else:
            threading.Thread(target=self._work, args=(conn, bytes(head), address, deadline),
                             name="control-request", daemon=True).start()

    def _healthz(self, conn: socket.socket) -> None:
        phase = self.runner.phase
        ok = phase != Phase.FAILED
        body = json.dumps(HealthResponse(ok=ok, phase=phase).to_wire()).encode()
        status = b"200 OK" if ok else b"503 Service Unavailable"
        self._refuse(conn, b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() +
                     b"\r\nConnection: close\r\n\r\n" + body)

    def _work(self, conn: socket.socket, head: bytes, address: Any, deadline: float) -> None:
        try:
            conn.setblocking(True)
            conn.settimeout(max(0.01, deadline - time.monotonic()))
            self._handler(_Connection(conn, head, deadline), address, self)
        except OSError:
            pass  # the client went away or missed the deadline: nothing to answer
        finally:
            _close_after_answer(conn)
            self._workers.release()

    def _unregister(self, conn: socket.socket) -> None:
        self._pending.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn)

    def _drop(self, conn: socket.socket) -> None:
        self._unregister(conn)
        with contextlib.suppress(OSError):
            conn.close()

    def _refuse(self, conn: socket.socket, answer: bytes) -> None:
        """A short answer (it fits the socket's buffer), then a lingering close that the
        selector finishes (what the client still sends is dropped until it closes or
        :data:`LINGER_SECONDS` pass), so this thread never waits on one client."""
        try:
            conn.setblocking(False)
            conn.send(answer)
            conn.shutdown(socket.SHUT_WR)
            self._selector.register(conn, selectors.EVENT_READ)
        except (OSError, ValueError, KeyError):
            with contextlib.suppress(OSError):
                conn.close()
            return
        self._closing[conn] = time.monotonic() + LINGER_SECONDS

    def _linger(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            if conn.recv(65536):
                return
        self._close(conn)

    def _close(self, conn: socket.socket) -> None:
        self._closing.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn)
        with contextlib.suppress(OSError):
            conn.close()


LINGER_SECONDS = 0.5
"""After an answer, what the client still sends is read and dropped for at most this long
before the close: closing with unread bytes makes the kernel send a reset, which can destroy the
answer before the client reads it (a 413 or 431 sent before the body or the rest of the head)."""
LINGER_BYTES = 1 << 20


def _close_after_answer(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)  # the answer, then FIN
        conn.setblocking(True)
        end, dropped = time.monotonic() + LINGER_SECONDS, 0
        while dropped < LINGER_BYTES and (left := end - time.monotonic()) > 0:
            conn.settimeout(left)
            chunk = conn.recv(65536)
            if not chunk:
                break
            dropped += len(chunk)
    with contextlib.suppress(OSError):
        conn.close()


class _Connection:
    """A connection whose head the selector already read: ``makefile('rb')`` serves the head
    first, then the socket (the body), so BaseHTTPRequestHandler parses it as usual."""

    def __init__(self, conn: socket.socket, head: bytes, deadline: float) -> None:
        self._conn, self._head, self._deadline = conn, head, deadline

    def makefile(self, mode: str, buffering: int = -1) -> Any:
        if "r" in mode:
            return io.BufferedReader(_Prefixed(self._head, self._conn, self._deadline))
        return self._conn.makefile(mode, buffering)  # type: ignore[call-overload]

    def settimeout(self, value: float | None) -> None:
        pass  # the worker set the deadline's remainder already

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class _Prefixed(io.RawIOBase):
    """The head's bytes, then the socket's, each read within what is left of the deadline (a
    socket timeout alone is per read: a drip would reset it with every byte)."""

    def __init__(self, head: bytes, conn: socket.socket, deadline: float) -> None:
        self._head, self._conn, self._deadline = memoryview(head), conn, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request's deadline passed")
        self._conn.settimeout(left)
        return self._conn.recv_into(buffer)


class _Handler(BaseHTTPRequestHandler):
    runner: JobRunner
    token: str
    server_version = "stream-autoscaler"

    def handle(self) -> None:
        self.close_connection = True
        self.handle_one_request()  # one request per connection: no idle keep-alive holds a worker

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
        # past 18 digits it is larger than any body we take (int() of 5,000 digits raises)
        length = int(header) if len(header) <= 18 else MAX_BODY_BYTES + 1
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
        self.send_header("Connection", "close")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
