"""Where a checkpoint lives: locations to file systems (operators/state/store.py).

The object-store half against a real S3 server: tests/integration/s3.
"""

from __future__ import annotations

import pytest

from operators import state
from operators.state.store import (
    CheckpointStore,
    StoreError,
    configure_object_store,
    is_object_store,
    open_store,
)


@pytest.fixture(autouse=True)
def _no_settings(monkeypatch):
    for var in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION"):
        monkeypatch.delenv(var, raising=False)
    configure_object_store({})
    yield
    configure_object_store({})


@pytest.mark.parametrize("where", ["{d}/cp", "file://{d}/cp", "file:{d}/cp"])
def test_local_locations_open_the_same_directory(tmp_path, where):
    cp = open_store(where.format(d=tmp_path))
    assert cp.local and cp.root == str(tmp_path / "cp")
    (tmp_path / "cp" / "offsets").mkdir(parents=True)
    (tmp_path / "cp" / "offsets" / "0").write_text("v1\n{}\n")
    assert cp.listdir("offsets") == ["0"] and cp.is_dir("offsets") and cp.is_file("offsets", "0")
    assert cp.listdir("commits") == [] and not cp.exists("commits")


def test_local_write_replaces_whole_and_files_are_relative(tmp_path):
    cp = open_store(tmp_path)
    (tmp_path / "state" / "0" / "1").mkdir(parents=True)
    cp.write_text("one", "state", "0", "1", "2.changelog")
    cp.write_text("two", "state", "0", "1", "2.changelog")
    assert cp.read_text("state", "0", "1", "2.changelog") == "two"
    assert [f.rel for f in cp.files()] == ["state/0/1/2.changelog"]
    assert cp.tree_bytes("state") == 3
    assert not list(tmp_path.rglob("*.tmp"))
    cp.delete("state", "0", "1", "2.changelog")
    cp.delete("state", "0", "1", "missing")  # a missing file is fine
    cp.prune_empty_dirs(set())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("location", "problem"), [
    ("hdfs://nn/cp", "unsupported-scheme"),
    ("gs://bucket/cp", "unsupported-scheme"),
    ("s3a:///cp", "no-bucket"),
])
def test_locations_we_cannot_read_are_refused_by_name(location, problem):
    with pytest.raises(StoreError) as e:
        open_store(location)
    assert e.value.problem == problem and location in str(e.value)
    with pytest.raises(state.CheckpointError) as ce:  # and inspect says the same
        state.inspect(location)
    assert ce.value.problem == problem


def test_object_store_from_the_jobs_s3a_settings():
    configure_object_store({
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
        "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
        "spark.sql.shuffle.partitions": "8",  # not ours: ignored
    })
    cp = open_store("s3a://checkpoints/jobs/orders/")
    assert isinstance(cp, CheckpointStore) and not cp.local
    assert cp.root == "checkpoints/jobs/orders" and cp.path("offsets", "3") == \
        "checkpoints/jobs/orders/offsets/3"
    assert cp.fs.region == "eu-west-1"
    assert is_object_store("s3a://b/p") and is_object_store("s3://b/p")
    assert not is_object_store("/data/cp") and not is_object_store("file:///data/cp")


def test_object_store_endpoint_from_the_aws_environment(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    assert open_store("s3a://b/cp").fs.region == "ap-south-1"


def test_the_lock_is_a_file_lock_locally_and_none_on_an_object_store(tmp_path):
    lock = state.CheckpointLock(tmp_path / "cp")
    assert lock.held
    with pytest.raises(state.CheckpointError) as e:
        state.CheckpointLock(tmp_path / "cp")
    assert e.value.problem == "in-use"
    lock.release()
    assert not lock.held
    remote = state.CheckpointLock("s3a://bucket/cp")
    assert not remote.held and remote.path is None


IMDS_PROBE = r'''
import http.server, os, subprocess, sys, threading
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
subprocess.run(["ip", "addr", "add", "169.254.169.254/32", "dev", "lo"], check=True)
asked = []
class Imds(http.server.BaseHTTPRequestHandler):
    def _any(self):
        asked.append(self.path)
        self.send_response(404)
        self.end_headers()
    do_GET = do_PUT = _any
    def log_message(self, *a):
        pass
server = http.server.ThreadingHTTPServer(("169.254.169.254", 80), Imds)
threading.Thread(target=server.serve_forever, daemon=True).start()
from operators.state.store import configure_object_store, open_store
configure_object_store({"spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9"})
import time
open_store("s3a://bucket/cp")
time.sleep(2.0)  # the SDK asks from its own threads too: what it asks within 2 s counts
ours = len(asked)
from pyarrow.fs import S3FileSystem
S3FileSystem(region="us-east-1", endpoint_override="127.0.0.1:9", scheme="http")
time.sleep(2.0)
print(ours, len(asked) - ours)
'''


def test_keys_in_the_environment_never_wait_for_the_instance_metadata_service(tmp_path):
    """With the keys in the environment (a pod given a Secret's keys as variables) the S3
    client is built with them, so the SDK never asks the instance metadata service: left to
    its chain it asks for credentials and, with no AWS_REGION in the environment, for the
    region even when one is given (four requests before this client took the keys), and in
    a pod with no route to the service each client waited ~6 s; a recovered driver's
    checkpoint check built several. Checked against a fake service in a private network
    namespace, which the SDK's own chain does ask (what lets this test see the difference)."""
    import os
    import shutil
    import subprocess
    import sys

    from tests.realcomponents import REPO, unavailable

    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        unavailable("a private network namespace needs root, unshare and ip")
    script = tmp_path / "imds.py"
    script.write_text(IMDS_PROBE)
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "key", "AWS_SECRET_ACCESS_KEY": "secret",
           "PYTHONPATH": str(REPO)}
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_EC2_METADATA_DISABLED"):
        env.pop(var, None)  # as in the pod: the keys from a Secret, the region in the job's conf
    done = subprocess.run(["unshare", "-n", sys.executable, str(script)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    ours, chain = map(int, done.stdout.split())
    assert ours == 0, f"our client asked the metadata service {ours} time(s)"
    assert chain > 0, "the SDK's chain asked nothing: the probe cannot see the difference"
