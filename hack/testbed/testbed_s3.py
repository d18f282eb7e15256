#!/usr/bin/env python3
"""A local S3-compatible server for tests: moto's server (``moto_server``) on loopback, from the
virtualenv `hack/tools/s3a/resolve.sh` caches (~/.cache/stream-autoscaler/s3a/moto-<MOTO_VERSION>/).

    python3 hack/testbed/testbed_s3.py            # serve until Ctrl-C, print endpoint and keys

    sys.path.insert(0, "hack/testbed"); import testbed_s3
    with testbed_s3.s3_server() as s3:             # a fresh, empty server per context
        s3.create_bucket("checkpoints")
        s3.endpoint, s3.access_key, s3.secret_key  # "http://127.0.0.1:<port>", test keys
        s3.keys("checkpoints", "q1/")              # what is stored, by plain HTTP

Unlike the Kafka broker (testbed_kafka.py) nothing is shared or kept: the server is a child of the
caller, holds its objects in memory, and stops (by its pid) when the context exits. moto takes any
credentials and does not check signatures, so a plain unsigned PUT makes a bucket.
Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from testbed_proc import cache_root, cmdline, free_port, read_versions, start, stop, wait_until

REPO = Path(__file__).resolve().parents[2]
VERSIONS_FILE = REPO / "hack" / "tools" / "s3a" / "versions.env"
START_TIMEOUT_SECONDS = 30.0
"""moto answers ~0.5 s after launch on an idle 2-core machine (it imports boto3 and flask); Spark
test suites sharing the cores have made every start here several times slower."""
HTTP_TIMEOUT_SECONDS = 10.0
"""One request to the loopback server: milliseconds when it is healthy."""
ACCESS_KEY = "testbed-access-key"
SECRET_KEY = "testbed-secret-key"
"""moto accepts any key pair; fixed values, so a failing test's logs are easy to read."""
REGION = "us-east-1"
S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
LAUNCHER = """\
import sys
from werkzeug.serving import WSGIRequestHandler
WSGIRequestHandler.handle_expect_100 = lambda self: True
from moto.server import main
main(sys.argv[1:])
"""
"""What runs moto_server's main(). Werkzeug answers ``Expect: 100-continue`` twice (http.server's
handle_expect_100, then its own run_wsgi: `curl -v` shows two ``100 Continue``), and the AWS SDK's
Netty client takes the second as the final response: every body PUT S3A sends through its async
client (RocksDB's SST uploads, copyFromLocalFile) failed with ``S3Exception ... Status Code: 100``
after retries. Real S3 sends one 100, and the sync (Apache) client tolerates two; silencing
http.server's leaves werkzeug's one (checked with `curl -v`)."""


class S3Missing(RuntimeError):
    """moto's virtualenv is not built: run `make tools` (hack/tools/s3a/resolve.sh)."""


def versions() -> dict[str, str]:
    return read_versions(VERSIONS_FILE)


def cache_dir() -> Path:
    return Path(os.environ.get("SA_S3A_CACHE", cache_root() / "s3a"))


def moto_server() -> Path:
    """The venv's ``moto_server`` executable; S3Missing if the venv was never (fully) built."""
    venv = cache_dir() / f"moto-{versions()['MOTO_VERSION']}"
    exe = venv / "bin" / "moto_server"
    if not (venv / ".stamp").exists() or not os.access(exe, os.X_OK):
        raise S3Missing(f"moto S3 server not installed (run `make tools`): {exe}")
    return exe


@dataclass
class S3Server:
    """What a running server offers its user."""

    endpoint: str
    """``http://<host>:<port>``, path-style: ``<endpoint>/<bucket>/<key>``."""
    pid: int
    log: Path
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    region: str = REGION

    @property
    def env(self) -> dict[str, str]:
        """The variables S3A's default credential chain (and boto3, pyarrow) read."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_REGION": self.region}  # fmt: skip

    def create_bucket(self, name: str) -> None:
        """PUT ``<endpoint>/<name>`` (unsigned: moto does not check). Creating an existing
        bucket of ours succeeds, as in us-east-1."""
        if not BUCKET_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not an S3 bucket name")
        status, body = self._request("PUT", f"/{name}")
        if status != 200:
            raise RuntimeError(f"S3 PUT /{name}: HTTP {status}: {body[:300]!r}")

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key in ``bucket`` under ``prefix`` (ListObjectsV2, all pages)."""
        out: list[str] = []
        token = None
        while True:
            query = {"list-type": "2", "prefix": prefix}
            if token:
                query["continuation-token"] = token
            status, body = self._request("GET", f"/{bucket}?{urllib.parse.urlencode(query)}")
            if status != 200:
                raise RuntimeError(f"S3 list {bucket}/{prefix}: HTTP {status}: {body[:300]!r}")
            root = ET.fromstring(body)
            out += [c.findtext(f"{S3_NS}Key", "") for c in root.iter(f"{S3_NS}Contents")]
            token = root.findtext(f"{S3_NS}NextContinuationToken")
            if root.findtext(f"{S3_NS}IsTruncated") != "true" or not token:
                return out

    def _request(self, method: str, path: str) -> tuple[int, bytes]:
        data = b"" if method == "PUT" else None
        req = urllib.request.Request(self.endpoint + path, data=data, method=method)
        try:
            with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_SECONDS) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()


def _answers(endpoint: str) -> bool:
    """ListBuckets answered: the server serves S3."""
    try:
        with urllib.request.urlopen(endpoint + "/", timeout=2.0) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def s3_server(bind: str = "127.0.0.1", *, log_dir: Path | None = None) -> Iterator[S3Server]:
    """A fresh moto server on ``bind`` and a free port, for the duration of the context.
    Its log goes to ``log_dir``/moto.log (kept) or to a temporary directory (removed)."""
    exe = moto_server()
    port = free_port()
    host = "127.0.0.1" if bind in ("", "0.0.0.0") else bind
    endpoint = f"http://{host}:{port}"
    keep = log_dir is not None
    log = (log_dir if log_dir is not None else Path(tempfile.mkdtemp(prefix="testbed-s3-")))
    log = log / "moto.log"
    # The venv's python runs moto_server's main() (see LAUNCHER), and /proc/<pid>/cmdline is
    # exactly this argv, so stop() recognises the process as ours.
    argv = [str(exe.parent / "python"), "-c", LAUNCHER, "-H", bind, "-p", str(port)]
    t0 = time.monotonic()
    pid = start(argv, log)
    try:
        wait_until("moto S3 server", lambda: _answers(endpoint), START_TIMEOUT_SECONDS, log,
                   alive=lambda: cmdline(pid) is not None)  # fmt: skip
        print(f"testbed: moto S3 server (pid {pid}) on {endpoint} in "
              f"{time.monotonic() - t0:.1f} s", flush=True)  # fmt: skip
        yield S3Server(endpoint, pid, log)
    finally:
        stop(pid, argv, timeout=10)
        if not keep:
            shutil.rmtree(log.parent, ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        print(__doc__)
        return 2
    try:
        with s3_server(log_dir=Path(tempfile.mkdtemp(prefix="testbed-s3-"))) as s3:
            for k, v in s3.env.items():
                print(f"{k}={v}")
            print(f"S3_ENDPOINT={s3.endpoint}\n(Ctrl-C stops it; log: {s3.log})", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                while cmdline(s3.pid) is not None:
                    time.sleep(1)
    except S3Missing as e:
        print(f"testbed: {e}", file=sys.stderr)
        return 3
    except TimeoutError as e:
        print(f"testbed: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
