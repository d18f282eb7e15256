"""The direct scrape of a runner's /metrics is bounded in size and in time, and neither it nor
the runner client follows a redirect: a hostile or broken runner cannot stall a worker, run the
controller out of memory, or send the controller (and its bearer token) to another host."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from controller.adapters.promql import Window
from controller.adapters.runner_client import RunnerClient, RunnerRefused
from controller.adapters.scrape import ScrapeSource, ScrapeTooLarge, requests_fetch


class Hostile(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.endswith("/redirect") or self.path == "/status":
            self.send_response(302)
            self.send_header("Location", self.server.elsewhere)  # type: ignore[attr-defined]
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        if self.path == "/huge":  # 64 MiB of comments, streamed
            line = b"# " + b"x" * 1022 + b"\n"
            for _ in range(64 * 1024):
                try:
                    self.wfile.write(line)
                except OSError:
                    return
        elif self.path == "/drip":  # one byte every 0.2 s, for ever (bounded: 60 s)
            for _ in range(300):
                try:
                    self.wfile.write(b"#")
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.2)


class Elsewhere(BaseHTTPRequestHandler):
    """Another host: records every request that reaches it."""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.hits.append((self.path, self.headers.get("Authorization")))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


def _serve(handler: type[BaseHTTPRequestHandler], host: str = "127.0.0.1") -> ThreadingHTTPServer:
    srv = ThreadingHTTPServer((host, 0), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture()
def elsewhere() -> Iterator[ThreadingHTTPServer]:
    srv = _serve(Elsewhere, "127.0.0.2")  # another address of loopback: another host
    srv.hits = []  # type: ignore[attr-defined]
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture()
def base(elsewhere: ThreadingHTTPServer) -> Iterator[str]:
    srv = _serve(Hostile)
    srv.elsewhere = (  # type: ignore[attr-defined]
        f"http://127.0.0.2:{elsewhere.server_address[1]}/latest/meta-data/")
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.mark.timeout(30)
def test_a_huge_answer_is_cut_at_the_cap(base: str) -> None:
    fetch = requests_fetch(timeout_seconds=10, max_bytes=1 << 20)
    with pytest.raises(ScrapeTooLarge, match="larger than 1,048,576 bytes"):
        fetch(base + "/huge")


@pytest.mark.timeout(30)
def test_a_slow_drip_is_cut_at_the_deadline_and_reads_as_unknown(base: str) -> None:
    source = ScrapeSource({"wc": base + "/drip"}.get, fetch=requests_fetch(timeout_seconds=1.0))
    started = time.monotonic()
    snap = source.snapshot("wc", Window(30), time.time())
    assert time.monotonic() - started < 3.0
    assert snap.unavailable and "not complete within 1 s" in snap.unavailable
    assert snap.observed_at is None  # unknown, never zero


@pytest.mark.timeout(30)
def test_neither_the_scrape_nor_the_runner_client_follows_a_redirect(
    base: str, elsewhere: ThreadingHTTPServer
) -> None:
    """A runner answering 302 to another host: the scrape reads it as unknown, the client as
    refused, and the other host sees no request (so never the token)."""
    source = ScrapeSource({"wc": base + "/redirect"}.get, fetch=requests_fetch())
    snap = source.snapshot("wc", Window(30), time.time())
    assert snap.unavailable and "HTTP 302" in snap.unavailable
    client = RunnerClient(base, "secret-token")
    with pytest.raises(RunnerRefused) as e:
        client.status()
    assert e.value.status == 302
    assert elsewhere.hits == []  # type: ignore[attr-defined]
