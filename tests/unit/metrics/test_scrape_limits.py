"""The direct scrape of a runner's /metrics is bounded in size and in time (issue #15 item 3): a
hostile or broken runner cannot stall a worker or run the controller out of memory."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from controller.adapters.promql import Window
from controller.adapters.scrape import ScrapeSource, ScrapeTooLarge, requests_fetch


class Hostile(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
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


@pytest.fixture()
def base() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
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
