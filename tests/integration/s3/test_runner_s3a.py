"""A job checkpointed on ``s3a://`` as a user runs it: the runner a subprocess on a real
standalone cluster, the checkpoint on a real S3 server (moto, started locally), scaled,
repartitioned (Spark's offline repartition reading and writing S3), killed and resumed, exactly
once; and the refusals a user meets first (a dead endpoint, a missing bucket), leaving nothing.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from contracts.manifests import load_job
from operators import state
from operators.s3a import hadoop_s3a_conf
from tests.integration.spark_runtime.conftest import (  # noqa: F401 (fixtures)
    REPO,
    cluster,
    local_spark,
    start_runner,
    write_job,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def s3_job(directory: Path, s3: Any, location: str, **kw: Any) -> tuple[Path, dict[str, str]]:
    """The runtime tier's word count with its checkpoint at ``location`` and the S3 settings a
    user writes: the endpoint in spark.conf, the keys in the environment (the driver's, and the
    standalone executors' through spark.executorEnv)."""
    job = write_job(directory, **kw)
    doc = yaml.safe_load(job.read_text())
    doc["spec"]["checkpoint"]["location"] = location
    doc["spec"]["spark"] = {"conf": {
        **hadoop_s3a_conf(s3.endpoint),
        "spark.executorEnv.AWS_ACCESS_KEY_ID": s3.access_key,
        "spark.executorEnv.AWS_SECRET_ACCESS_KEY": s3.secret_key,
    }}
    job.write_text(yaml.safe_dump(doc))
    return job, {"AWS_ACCESS_KEY_ID": s3.access_key, "AWS_SECRET_ACCESS_KEY": s3.secret_key}


def test_a_checkpoint_on_s3_scales_repartitions_and_resumes_exactly_once(
    s3, start_runner, tmp_path, local_spark, monkeypatch  # noqa: F811
):
    bucket = f"ckpt-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(bucket)
    loc = f"s3a://{bucket}/jobs/rt"
    job, env = s3_job(tmp_path / "job", s3, loc, partitions=4)
    # the test process reads the checkpoint as the CLI would: the endpoint from the environment
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    for k, v in env.items():
        monkeypatch.setenv(k, v)

    r = start_runner(job, env=env)
    st = r.wait(lambda s: (s["lastCommittedBatch"] or -1) >= 1, 180, "two batches on S3")
    assert st["partitions"] == 4

    up = r.action("/executors", {"target": 2})
    print("scale 1->2 on s3a", json.dumps(up["timings"]))
    assert up["state"] == "succeeded" and up["result"]["added"], up

    # Spark's offline repartition, reading and writing the state on S3; our row check and
    # snapshot (the rollback's copy) through pyarrow's S3 client
    act = r.action("/repartition", {"partitions": 8})
    print("repartition 4->8 on s3a", json.dumps(act["timings"]), json.dumps(act["steps"]),
          act["result"])
    assert act["state"] == "succeeded", act
    assert act["result"]["rows_before"] == act["result"]["rows_after"] > 0
    assert act["result"]["rows_before_from"] == "files"  # the store's count read from S3
    batch = act["result"]["repartition_batch"]
    assert state.partitions_of(loc, batch) == 8
    st = r.wait(lambda s: (s["lastCommittedBatch"] or -1) >= batch + 2, 180, "batches at 8")
    assert st["partitions"] == 8 and st["phase"] == "Running"
    print("offsets/ on S3:", state.open_store(loc).listdir("offsets"))
    parts = state.open_store(loc).listdir("state", "0")
    assert sorted(int(p) for p in parts if p.isdigit()) == list(range(8)), parts

    # SIGKILL the driver: a new runner resumes from the checkpoint on S3 (no lock to break)
    before = st["lastCommittedBatch"]
    r.kill()
    r2 = start_runner(job, env=env, max_executors=1)  # it never scales out
    st = r2.wait(lambda s: (s["lastCommittedBatch"] or -1) >= before + 2, 180, "resumed")
    assert st["resumedFromBatch"] is not None and st["resumedFromBatch"] >= before
    assert st["partitions"] == 8
    assert r2.stop() == 0

    from operators.verifier import verify

    result = verify(load_job(str(job)).spec, spark=local_spark)
    assert result.ok, result.message
    print("exactly once on s3a:", result.keys_checked, "keys", result.records)

    out = subprocess.run([sys.executable, "-m", "app.cli", "checkpoint", "inspect", loc],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["partitions"] == 8 and info["job"] == "rt" and info["uncommittedBatch"] is None
    assert info["operators"] and info["operators"][0]["diskBytes"] > 0


@pytest.mark.parametrize("problem", ["unreachable", "no-bucket"])
def test_a_dead_endpoint_or_a_missing_bucket_is_refused_by_name(
    s3, cluster, tmp_path, problem  # noqa: F811
):
    bucket = f"kept-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(bucket)
    if problem == "unreachable":
        with socket.socket() as sock:  # a port nothing listens on
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        dead = SimpleNamespace(endpoint=f"http://127.0.0.1:{port}", access_key=s3.access_key,
                               secret_key=s3.secret_key)
        job, env = s3_job(tmp_path, dead, f"s3a://{bucket}/jobs/rt")
    else:
        job, env = s3_job(tmp_path, s3, "s3a://no-such-bucket/jobs/rt")
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "runner", "--job", str(job), "--master",
         cluster.master_url, "--control-port", "0", "--metrics-port", "0",
         "--token-file", str(tmp_path / "token")],
        cwd=REPO, capture_output=True, text=True, timeout=120,
        env={**os.environ, **env})
    assert out.returncode == 2, out.stderr[-2000:]
    assert "refusing to start" in out.stderr and problem in out.stderr, out.stderr[-2000:]
    assert "Traceback" not in out.stderr


def test_a_corrupt_commit_among_many_on_s3_is_named_by_its_batch(s3):
    """On an object store the commit entries are read at once
    (``operators.state.checkpoint.OBJECT_STORE_READERS``: a request each, ~100 of them, at
    every start); the first bad one in batch order is still the one named, and a healthy log
    still reads as healthy."""
    from operators.state.checkpoint import OBJECT_STORE_READERS, store_of

    bucket = f"log-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(bucket)
    loc = f"s3a://{bucket}/cp"
    state.configure_object_store(hadoop_s3a_conf(s3.endpoint))
    try:
        cp = store_of(loc)
        batches = range(4 * OBJECT_STORE_READERS)
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1,
                "conf": {"spark.sql.shuffle.partitions": "4"}}
        cp.write_text(json.dumps({"id": "4f1c2d3e-0000-4000-8000-000000000001"}) + "\n",
                      "metadata")
        for b in batches:
            cp.write_text(f"v1\n{json.dumps(meta)}\n{{\"main\": {b * 10}}}\n", "offsets", str(b))
            cp.write_text('v1\n{"nextBatchWatermarkMs":0}\n', "commits", str(b))
        assert state.inspect(loc).last_committed_batch == batches[-1]
        cp.write_text("garbage", "commits", "40")
        cp.write_text("", "commits", "21")
        with pytest.raises(state.CheckpointError) as e:
            state.inspect(loc)
        assert e.value.problem == "unparsable-commit" and "commits/21" in str(e.value)
    finally:
        state.configure_object_store({})
