"""The runner's control endpoint under hostile requests (issue #15 item 4): every request gets an
answer naming what is wrong, slow and surplus connections are cut, the token is compared as the
controller sends it. The runner behind it is a stand-in (a seam we own: operators.control only
calls phase, status(), find_action() and submit()); no Spark."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from contracts.runner_api import ActionRecord, Phase, RunnerStatus
from operators import control
from operators.control import ControlServer, load_token

TOKEN = "s3cret"


class StandInRunner:
    """Accepts every action; remembers them by id."""

    phase = Phase.RUNNING

    def __init__(self) -> None:
        self.actions: dict[str, ActionRecord] = {}

    def status(self) -> RunnerStatus:
        return RunnerStatus(job="wc", phase=self.phase)

    def find_action(self, action_id: str | None) -> ActionRecord | None:
        return self.actions.get(action_id) if action_id else None

    def submit(self, request: Any) -> ActionRecord:
        record = ActionRecord(kind=request.kind, params=request.body())
        self.actions[request.action_id or record.id] = record
        return record


@pytest.fixture()
def server() -> Iterator[ControlServer]:
    srv = ControlServer(StandInRunner(), token=TOKEN + "\n").start()  # as read from a Secret file
    yield srv
    srv.stop()


def raw(server: ControlServer, request: bytes, timeout: float = 5.0) -> tuple[int, dict[str, Any]]:
    with socket.create_connection((server.host, server.port), timeout=timeout) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    return status, (json.loads(body) if body else {})


def post(path: str, body: bytes, length: str | None = None, token: str = TOKEN) -> bytes:
    n = str(len(body)) if length is None else length
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Length: {n}\r\nConnection: close\r\n\r\n").encode() + body


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("request_bytes", "status", "message"),
    [
        (post("/executors", b'{"target": 2}', length="-1"), 400, "Content-Length ('-1')"),
        (post("/executors", b'{"target": 2}', length="abc"), 400, "Content-Length ('abc')"),
        (post("/executors", b"[" * 30_000 + b"]" * 30_000), 400, "nested too deeply"),
        (post("/executors", b"x" * (control.MAX_BODY_BYTES + 1)), 413, "body too large"),
        (post("/executors", b'{"target": true}'), 400, "target"),
        (post("/executors", b'{"target": 2}', token=TOKEN + " "), 202, ""),
    ],
    ids=["negative-length", "non-numeric-length", "deep-json", "too-large", "bool-target",
         "token-with-trailing-space"],
)
def test_every_request_gets_an_answer(
    server: ControlServer, request_bytes: bytes, status: int, message: str
) -> None:
    got, body = raw(server, request_bytes)
    assert got == status, body
    assert message in json.dumps(body)


@pytest.mark.timeout(30)
def test_a_slow_drip_is_cut_and_surplus_connections_get_503(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(control._Handler, "timeout", 3.0)  # the same code path, sooner
    server = ControlServer(StandInRunner(), token=TOKEN).start()
    held = []
    try:
        for _ in range(control.MAX_CONNECTIONS):  # each holds a worker: headers never end
            s = socket.create_connection((server.host, server.port), timeout=5)
            s.sendall(b"POST /executors HTTP/1.1\r\nHost: x\r\n")
            held.append(s)
        time.sleep(0.2)
        refused = http.client.HTTPConnection(server.host, server.port, timeout=5)
        refused.request("GET", "/healthz")
        assert refused.getresponse().status == 503
        refused.close()
        started = time.monotonic()
        for s in held:  # the server closes each drip once its socket times out
            s.settimeout(10)
            assert s.recv(1024) == b""
        assert time.monotonic() - started < 10
        time.sleep(0.2)
        ok = http.client.HTTPConnection(server.host, server.port, timeout=5)
        ok.request("GET", "/healthz")
        assert ok.getresponse().status == 200  # the workers were released
        ok.close()
    finally:
        for s in held:
            s.close()
        server.stop()


@pytest.mark.parametrize(
    ("given", "env", "expected"),
    [("tok\n", None, "tok"), (None, " tok\n", "tok"), ("", "tok", "tok")],
    ids=["argument", "environment", "empty-argument-falls-back"],
)
def test_the_token_is_stripped_as_the_controller_strips_it(
    monkeypatch: pytest.MonkeyPatch, given: str | None, env: str | None, expected: str
) -> None:
    if env is None:
        monkeypatch.delenv("STREAM_AUTOSCALER_TOKEN", raising=False)
    else:
        monkeypatch.setenv("STREAM_AUTOSCALER_TOKEN", env)
    assert load_token(given) == expected
