"""The runner's control endpoint under hostile requests: every request gets an answer naming
what is wrong, slow connections are cut at a whole-request deadline without holding a worker,
/healthz and authenticated requests are answered under a flood, surplus work gets 503 at once,
the token is compared as the controller sends it. The runner behind it is a stand-in (a seam we
own: operators.driver.control only calls phase, status(), find_action() and submit()); no Spark."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from contracts.runner_api import ActionRecord, Phase, RunnerStatus
from operators.driver import control
from operators.driver.control import ControlServer, load_token

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
        (post("/executors", b"{}", length="9" * 5000), 413, "body too large"),
        (post("/executors", b'{"target": true}'), 400, "target"),
        (post("/executors", b'{"target": 2}', token=TOKEN + " "), 202, ""),
    ],
    ids=["negative-length", "non-numeric-length", "deep-json", "too-large", "5000-digit-length",
         "bool-target",
         "token-with-trailing-space"],
)
def test_every_request_gets_an_answer(
    server: ControlServer, request_bytes: bytes, status: int, message: str
) -> None:
    got, body = raw(server, request_bytes)
    assert got == status, body
    assert message in json.dumps(body)


def _slow(server: ControlServer, n: int) -> list[socket.socket]:
    """``n`` connections whose headers never end (pre-auth: no token has been seen)."""
    held = []
    for _ in range(n):
        s = socket.create_connection((server.host, server.port), timeout=5)
        s.sendall(b"POST /executors HTTP/1.1\r\nHost: x\r\n")
        held.append(s)
    return held


def _get(server: ControlServer, path: str, token: str = TOKEN) -> int:
    c = http.client.HTTPConnection(server.host, server.port, timeout=5)
    try:
        c.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        return c.getresponse().status
    finally:
        c.close()


@pytest.mark.timeout(60)
def test_a_flood_of_slow_connections_starves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten times the workers in slow, unauthenticated connections: /healthz and an
    authenticated /status are answered at once, every slow one is cut at the whole-request
    deadline, and nothing is left held."""
    monkeypatch.setattr(control, "REQUEST_DEADLINE_SECONDS", 3.0)  # the same path, sooner
    server = ControlServer(StandInRunner(), token=TOKEN).start()
    held = _slow(server, 10 * control.MAX_CONNECTIONS)
    try:
        time.sleep(0.3)
        started = time.monotonic()
        assert _get(server, "/healthz", token="") == 200
        assert _get(server, "/status") == 200
        assert time.monotonic() - started < 1.0
        for s in held:  # cut at the deadline: the server closes each without an answer
            s.settimeout(10)
            assert s.recv(1024) == b""
        assert time.monotonic() - started < 6.0
        assert not server._pending
    finally:
        for s in held:
            s.close()
        server.stop()


@pytest.mark.timeout(30)
def test_a_drip_is_cut_at_the_whole_request_deadline_however_often_it_sends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A byte every 0.3 s never lets a per-read timeout expire; the deadline counts from the
    accept. An authenticated request whose body drips is cut the same way."""
    monkeypatch.setattr(control, "REQUEST_DEADLINE_SECONDS", 2.0)
    server = ControlServer(StandInRunner(), token=TOKEN).start()
    try:
        for prefix in (b"GET /status HTTP/1.1\r\nX-Drip: ",
                       post("/executors", b"", length="4000")):
            s = socket.create_connection((server.host, server.port), timeout=1)
            started = time.monotonic()
            closed = False
            s.sendall(prefix)
            while time.monotonic() - started < 8:
                try:
                    s.sendall(b"a")
                    s.settimeout(0.3)
                    if s.recv(1024) == b"":
                        closed = True
                        break
                except TimeoutError:
                    continue
                except OSError:
                    closed = True
                    break
            s.close()
            assert closed and time.monotonic() - started < 4.0, prefix[:20]
    finally:
        server.stop()


@pytest.mark.timeout(60)
def test_a_burst_of_connects_is_answered_and_surplus_work_gets_503_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """400 clients at once, each a complete request: every one gets an answer within seconds
    (200, or 503 when all workers are busy), none waits on the listen queue; past MAX_PENDING
    slow connections a new one is refused at once."""
    monkeypatch.setattr(control, "MAX_PENDING", 8)
    server = ControlServer(StandInRunner(), token=TOKEN).start()
    try:
        socks = [socket.create_connection((server.host, server.port), timeout=10)
                 for _ in range(400)]
        for s in socks:
            s.sendall(b"GET /status HTTP/1.1\r\nAuthorization: Bearer " + TOKEN.encode() +
                      b"\r\n\r\n")
        started = time.monotonic()
        codes = []
        for s in socks:
            data = b""
            while chunk := s.recv(65536):
                data += chunk
            codes.append(int(data.split()[1]))
            s.close()
        assert time.monotonic() - started < 10
        assert set(codes) <= {200, 503} and 200 in codes, sorted(set(codes))
        held = _slow(server, 8)
        time.sleep(0.3)
        refused = socket.create_connection((server.host, server.port), timeout=5)
        assert refused.recv(1024).startswith(b"HTTP/1.1 503")
        refused.close()
        for s in held:
            s.close()
    finally:
        server.stop()


def test_a_head_past_its_limit_gets_431() -> None:
    server = ControlServer(StandInRunner(), token=TOKEN).start()
    try:
        got, _ = raw(server, b"GET /status HTTP/1.1\r\nX: " + b"a" * (control.MAX_HEAD_BYTES + 10))
        assert got == 431
    finally:
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
