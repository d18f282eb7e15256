"""The runtime's pieces that need no Spark: checkpoint reading, backup/restore, rollback,
executor choice, metrics parsing, and the control endpoint's HTTP contract (with a stand-in
runner: the seam is ``JobRunner.submit/status``, which we own)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from contracts.runner_api import (
    ActionRecord,
    ActionRequest,
    ExecutorsRequest,
    Phase,
    RunnerStatus,
)
from operators import state
from operators.driver.exporter import RunnerMetrics
from operators.driver.runner import ActionConflict
from operators.driver.stages import stage_sample
from operators.query.session import ExecutorInfo, choose_victims
from operators.state.repartition import _Snapshot
from operators.state.store import open_store

ROCKS = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def make_checkpoint(root: Path, batches: int = 3, partitions: int = 4, extra: int = 0) -> Path:
    """A Spark-shaped checkpoint: metadata, offsets 0..n-1 (+extra uncommitted), commits."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "state" / "0" / "0").mkdir(parents=True)
    (root / "state" / "0" / "0" / "1.zip").write_bytes(b"x" * 100)
    (root / "metadata").write_text('{"id":"q-1"}\n')
    conf = {"spark.sql.shuffle.partitions": str(partitions),
            "spark.sql.streaming.stateStore.providerClass": ROCKS}
    for b in range(batches + extra):
        (root / "offsets" / str(b)).write_text(
            "v1\n" + json.dumps({"conf": conf}) + "\n" + json.dumps({"offset": 10 * (b + 1)}))
        if b < batches:
            (root / "commits" / str(b)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    return root


def test_inspect_reads_batches_partitions_and_state(tmp_path):
    cp = make_checkpoint(tmp_path / "cp", extra=1)
    info = state.inspect(cp)
    assert (info.query_id, info.last_committed_batch, info.partitions) == ("q-1", 2, 4)
    assert info.uncommitted_batch == 3 and info.source_offsets == ({"offset": 30},)
    assert info.operators[0].disk_bytes == 100
    assert state.inspect(tmp_path / "fresh").last_committed_batch is None


@pytest.mark.parametrize(
    ("problem", "damage"),
    [
        ("missing-metadata", lambda cp: (cp / "metadata").unlink()),
        ("unparsable-metadata", lambda cp: (cp / "metadata").write_text("{not json")),
        ("unparsable-offsets", lambda cp: (cp / "offsets" / "2").write_text("v1\n{broken")),
        ("foreign-query", lambda cp: (cp / "stream-autoscaler.json").write_text(
            '{"job": "j", "queryId": "q-other"}')),
        ("foreign-job", lambda cp: (cp / "stream-autoscaler.json").write_text(
            '{"job": "other", "queryId": "q-1"}')),
        ("unsupported-provider", lambda cp: (cp / "offsets" / "2").write_text(
            'v1\n{"conf":{"spark.sql.streaming.stateStore.providerClass":"x.HDFSBacked"}}\n')),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_corrupt_or_foreign_checkpoint_named(tmp_path, problem, damage):
    cp = make_checkpoint(tmp_path / "cp")
    damage(cp)
    with pytest.raises(state.CheckpointError) as e:
        state.inspect(cp, expected_job="j")
    assert e.value.problem == problem


def test_backup_at_last_committed_batch_and_restore(tmp_path):
    cp = make_checkpoint(tmp_path / "cp", extra=1)
    assert state.backup(cp, tmp_path / "bk") == 2
    assert not (tmp_path / "bk" / "offsets" / "3").exists()
    with pytest.raises(FileExistsError):
        state.backup(cp, tmp_path / "bk")
    assert state.restore(tmp_path / "bk", tmp_path / "cp2") == 2
    info = state.inspect(tmp_path / "cp2")
    assert info.last_committed_batch == 2 and info.uncommitted_batch is None
    with pytest.raises(FileExistsError):
        state.restore(tmp_path / "bk", cp)


def test_rollback_unfinished_repartition_only(tmp_path):
    cp = make_checkpoint(tmp_path / "cp", extra=1)  # same count: a normal in-flight batch
    assert state.rollback_unfinished(str(cp)) is None and (cp / "offsets" / "3").exists()
    (cp / "offsets" / "3").write_text(
        'v1\n{"conf":{"spark.sql.shuffle.partitions":"8"}}\n{"offset": 30}')
    assert state.rollback_unfinished(str(cp)) == 3 and not (cp / "offsets" / "3").exists()


def test_snapshot_restore_removes_new_files_and_restores_changed(tmp_path):
    cp = make_checkpoint(tmp_path / "cp")
    snap = _Snapshot.take(open_store(cp))
    (cp / "offsets" / "3").write_text("new")
    (cp / "state" / "0" / "5").mkdir()
    (cp / "state" / "0" / "5" / "2.zip").write_bytes(b"y")
    (cp / "metadata").write_text('{"id":"changed"}')
    snap.restore()
    snap.discard()
    assert not (cp / "offsets" / "3").exists() and not (cp / "state" / "0" / "5").exists()
    assert json.loads((cp / "metadata").read_text())["id"] == "q-1"


def test_victims_least_state_then_idle_then_newest():
    live = [ExecutorInfo(str(i), "h", 1, a, 10, 0) for i, a in ((0, 0), (1, 1), (2, 0), (3, 0))]
    assert choose_victims(live, 2, {"0": 4, "1": 0, "2": 0, "3": 2}) == ["2", "1"]
    assert choose_victims(live, 1, {}) == ["3"]


def test_progress_to_metrics_and_backlog():
    from contracts.trace import parse_trace
    from operators.sources.backlog import backlog_from_progress
    from operators.sources.burst import BurstBacklogProbe
    from operators.sources.burst_clock import BurstClock

    # 40 records/s from the run start (1 s): at 26 s, 1000 arrived; record 900 came at 23.5 s.
    # Spark's latestOffset (960) is what had arrived when it planned the batch: 100 wait now.
    probe = BurstBacklogProbe(BurstClock(parse_trace("t,input_rate\n0,40\n")))
    p = {"batchId": 7, "numInputRows": 100, "inputRowsPerSecond": 50.0,
         "processedRowsPerSecond": 80.0,
         "durationMs": {"addBatch": 700, "triggerExecution": 1000, "walCommit": 50},
         "stateOperators": [{"numRowsTotal": 42, "memoryUsedBytes": 9, "numShufflePartitions": 8,
                             "numRowsUpdated": 3, "customMetrics": {"rocksdbSstFileSize": 77}}],
         "sources": [{"endOffset": '{"offset": 900, "runStartUs": 1000000}',
                      "latestOffset": '{"offset": 960, "runStartUs": 1000000}'}]}
    b = backlog_from_progress(p, probe, now=26.0)
    assert b is not None
    assert (b.records, b.age_seconds, b.arrived_total) == (100, 2.5, 1000)
    m = RunnerMetrics("j", ["counts"])
    m.observe_progress(p, b)
    from prometheus_client import generate_latest

    text = generate_latest(m.registry).decode()
    for line in ('stream_autoscaler_last_committed_batch{job="j"} 7.0',
                 'stream_autoscaler_last_batch_overhead_seconds{job="j"} 0.3',
                 'stream_autoscaler_state_rows{job="j",operator="counts"} 42.0',
                 'stream_autoscaler_state_bytes{job="j",operator="counts"} 77.0',
                 'stream_autoscaler_backlog_records{job="j"} 100.0',
                 'stream_autoscaler_batch_duration_seconds_count{job="j"} 1.0'):
        assert line in text, line
    assert "NaN" not in text


def test_stage_sample_from_rest_json():
    runs = enumerate((100, 300, 900))
    tasks = {str(i): {"status": "SUCCESS", "executorId": str(i % 2),
                      "taskMetrics": {"executorRunTime": ms}} for i, ms in runs}
    st = stage_sample({"stageId": 5, "numTasks": 3, "executorRunTime": 1300,
                       "shuffleReadRecords": 50, "tasks": tasks,
                       "firstTaskLaunchedTime": "2026-11-21T08:10:00.000GMT",
                       "completionTime": "2026-11-21T08:10:01.500GMT"})
    assert (st.kind, st.tasks, st.rows, st.busy_seconds) == ("stateful", 3, 50, 1.3)
    assert (st.max_task_seconds, st.median_task_seconds, st.wall_seconds) == (0.9, 0.3, 1.5)
    assert st.tasks_by_executor == {"0": 2, "1": 1}


class StandInRunner:
    """Just the methods the endpoint calls."""

    phase = Phase.RUNNING

    def __init__(self) -> None:
        self.action: ActionRecord | None = None

    def status(self) -> RunnerStatus:
        return RunnerStatus(phase=self.phase)

    def find_action(self, action_id: str | None) -> ActionRecord | None:
        return self.action if self.action and self.action.id == action_id else None

    def submit(self, request: ActionRequest) -> ActionRecord:
        known = self.find_action(request.action_id)
        if known is not None:
            return known
        if self.action is not None:
            raise ActionConflict(Phase.SCALING, self.action)
        if isinstance(request, ExecutorsRequest):
            request.within(3)
        self.action = ActionRecord(kind=request.kind,
                                   params=request.model_dump(exclude={"action_id"}))
        if request.action_id:
            self.action.id = request.action_id
        return self.action


@pytest.fixture
def endpoint():
    from operators.driver.control import ControlServer

    server = ControlServer(StandInRunner(), token="s3cret").start()  # type: ignore[arg-type]
    yield f"http://127.0.0.1:{server.port}"
    server.stop()


def call(url: str, method: str = "GET", body: bytes | None = None, token: str = "s3cret"
         ) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, data=body, method=method,
                                 headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_control_contract(endpoint):
    assert call(endpoint + "/healthz", token="")[0] == 200
    assert call(endpoint + "/status", token="nope")[0] == 401
    code, body = call(endpoint + "/status")
    assert code == 200 and body["phase"] == "Running" and body["recentActions"] == []
    code, body = call(endpoint + "/executors", "POST", b"{bad json")
    assert code == 400 and body["field"] == "body"
    code, body = call(endpoint + "/executors", "POST", b'{"target": "x"}')
    assert code == 400 and body["field"] == "target"
    code, body = call(endpoint + "/repartition", "POST", b"{}")
    assert code == 400 and body["field"] == "partitions"
    code, body = call(endpoint + "/executors", "POST", b'{"target": 2, "actionId": 7}')
    assert code == 400 and body["field"] == "actionId"
    code, body = call(endpoint + "/executors", "POST", b'{"target": 4}')
    assert body == {"error": "target: an integer in 0..3 (max executors)", "field": "target"}
    code, body = call(endpoint + "/executors", "POST", b"null")
    assert code == 400 and body == {"error": "body: a JSON object is required", "field": "body"}
    code, body = call(endpoint + "/executors", "POST", b'{"target": 2, "actionId": "a-1"}')
    assert code == 202 and body == {"action": "a-1", "kind": "executors",
                                    "params": {"target": 2}, "state": "running",
                                    "phase": "Running"}
    # the same id again (a controller retrying after a crash): 200, the same action, no new one
    code, body = call(endpoint + "/executors", "POST", b'{"target": 2, "actionId": "a-1"}')
    assert code == 200 and body["duplicate"] is True and body["action"] == "a-1"
    code, body = call(endpoint + "/repartition", "POST", b'{"partitions": 8}')
    assert code == 409 and body["phase"] == "Scaling" and body["action"]["kind"] == "executors"
    assert call(endpoint + "/nope")[0] == 404


def test_token_file_created_when_absent(tmp_path, monkeypatch):
    from operators.driver.control import load_token

    monkeypatch.delenv("STREAM_AUTOSCALER_TOKEN", raising=False)
    path = tmp_path / "t" / "token"
    token = load_token(None, path)
    assert len(token) > 20 and path.read_text().strip() == token
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert load_token(None, path) == token
    monkeypatch.setenv("STREAM_AUTOSCALER_TOKEN", "from-env")
    assert load_token(None, path) == "from-env"


def test_checkpoint_lock_is_exclusive_and_released(tmp_path):
    import subprocess
    import sys

    cp = make_checkpoint(tmp_path / "cp")
    held = state.CheckpointLock(cp)
    probe = ("import sys; from operators import state\n"
             "try:\n    state.CheckpointLock(sys.argv[1])\nexcept state.CheckpointError as e:\n"
             "    print(e.problem)\n")
    out = subprocess.run([sys.executable, "-c", probe, str(cp)], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.stdout.strip() == "in-use", out.stderr
    held.release()
    state.CheckpointLock(cp).release()
