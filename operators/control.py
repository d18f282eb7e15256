"""The runner's HTTP/JSON control endpoint (bearer token, loopback unless told otherwise).

Usage::

    server = ControlServer(runner, token=load_token(args), host="127.0.0.1", port=8081)
    server.start()                      # a daemon thread; server.port is the bound port
    ...
    server.stop()

Routes: ``GET /healthz`` (no token), ``GET /status``, ``POST /executors {"target": n}``,
``POST /repartition {"partitions": n}``, ``POST /stop``. Actions run in the background: POST
answers 202 with the action id, ``/status`` shows progress and the result. A body may carry
``"actionId"``: a repeat of a known id answers 200 with that action (``"duplicate": true``) and
starts nothing, so a controller may retry after a crash without acting twice. A request while
another action runs gets 409 with the current phase; a bad body 400 naming the field; a missing
or wrong token 401.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from operators.runner import Conflict, JobRunner

TOKEN_ENV = "STREAM_AUTOSCALER_TOKEN"
MAX_BODY = 64 * 1024


def load_token(token: str | None = None, token_file: str | Path | None = None) -> str:
    """The bearer token: ``token``, else ``$STREAM_AUTOSCALER_TOKEN``, else the file's content;
    if the file does not exist, a new random token is written to it (mode 0600)."""
    if token:
        return token
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV]
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
        handler = type("Handler", (_Handler,), {"runner": runner, "token": token})
        self.httpd = ThreadingHTTPServer((host, port), handler)
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


class _Handler(BaseHTTPRequestHandler):
    runner: JobRunner
    token: str
    server_version = "stream-autoscaler"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: structlog logs actions
        pass

    def do_GET(self) -> None:
        if self.path == "/healthz":
            phase = self.runner.phase
            self._send(200 if phase != "Failed" else 503, {"ok": phase != "Failed",
                                                            "phase": phase})
        elif self.path == "/status":
            if self._authorized():
                self._send(200, self.runner.status())
        else:
            self._send(404, {"error": f"no route GET {self.path}"})

    def do_POST(self) -> None:
        routes = {"/executors": ("executors", "target"), "/repartition":
                  ("repartition", "partitions"), "/stop": ("stop", None)}
        if self.path not in routes:
            self._send(404, {"error": f"no route POST {self.path}"})
            return
        if not self._authorized():
            return
        kind, field = routes[self.path]
        body = self._body()
        if body is None:
            return
        params: dict[str, Any] = {}
        if field is not None:
            if field not in body:
                self._send(400, {"error": f"{field}: required", "field": field})
                return
            params[field] = body[field]
        action_id = body.get("actionId")
        if action_id is not None and not isinstance(action_id, str):
            self._send(400, {"error": "actionId: a string", "field": "actionId"})
            return
        try:
            before = self.runner.find_action(action_id)
            action = self.runner.submit(kind, action_id=action_id, **params)
        except Conflict as e:
            self._send(409, {"error": str(e), "phase": e.phase,
                             "action": e.action.to_dict() if e.action else None})
        except ValueError as e:
            self._send(400, {"error": str(e), "field": field})
        else:
            if before is not None:
                self._send(200, {"action": action.id, "kind": action.kind,
                                 "params": action.params, "state": action.state,
                                 "duplicate": True, "phase": self.runner.phase})
                return
            self._send(202, {"action": action.id, "kind": kind, "params": params,
                             "state": action.state, "phase": self.runner.phase})

    def _authorized(self) -> bool:
        header = self.headers.get("Authorization", "")
        given = header[7:] if header.startswith("Bearer ") else ""
        if given and hmac.compare_digest(given.encode(), self.token.encode()):
            return True
        self._send(401, {"error": "missing or wrong bearer token"},
                   {"WWW-Authenticate": "Bearer"})
        return False

    def _body(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._send(413, {"error": "body too large"})
            return None
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except ValueError as e:
            self._send(400, {"error": f"body: not JSON ({e})", "field": "body"})
            return None
        if not isinstance(body, dict):
            self._send(400, {"error": "body: a JSON object is required", "field": "body"})
            return None
        return body

    def _send(self, code: int, payload: dict[str, Any],
              headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload, default=str).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
