"""The user's own PySpark scripts, unmodified, under the runner (``runner --script``) on a real
standalone cluster: scaled out and in, repartitioned, the driver killed and the job recovered
from its checkpoint, every record counted once. The scripts are in ``examples/pyspark/``,
written as Spark's own examples are; none of them knows about us.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from operators import state

from .conftest import REPO

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EXAMPLES = REPO / "examples" / "pyspark"


def _script(name: str, checkpoint: Path, *args: Any) -> list[str]:
    return ["--script", str(EXAMPLES / name), "--checkpoint", str(checkpoint),
            "--trigger", "1", "--", *(str(a) for a in args)]


def _after(r: Any, batch: int, n: int = 2, timeout: float = 120) -> dict[str, Any]:
    return r.wait(lambda s: (s["lastCommittedBatch"] or -1) >= batch + n, timeout,
                  f"{n} batches after {batch}")


def _killed_and_resumed(r: Any, start_runner: Any, job: list[str], batches: int) -> Any:
    """SIGKILL the runner, start a new one on the same script, and wait until it has committed
    ``batches`` batches after the killed one's last, resumed from the checkpoint."""
    before = r.status()["lastCommittedBatch"]
    r.kill()
    r2 = start_runner(job, max_executors=1)  # it never scales out
    st = _after(r2, before, batches)
    assert st["resumedFromBatch"] is not None and st["resumedFromBatch"] >= before
    return r2


def _latest_counts(spark: Any, out: Path) -> list[Any]:
    """Each word's row from the latest batch that updated it (foreachBatch output)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = spark.read.parquet(str(out))
    w = Window.partitionBy("word").orderBy(F.col("batch").desc())
    return (df.withColumn("n", F.row_number().over(w)).where("n = 1")
            .select("word", "count", "max_value").collect())


def test_an_unmodified_word_count_scales_repartitions_and_recovers_exactly_once(
        start_runner, tmp_path, local_spark):
    cp, out = tmp_path / "cp", tmp_path / "out"
    job = _script("rate_wordcount.py", cp, out, 1500)
    r = start_runner(job)
    st = _after(r, 0, 1)
    assert st["job"] == "rate-wordcount" and st["phase"] == "Running"
    # The script sets no shuffle partitions: the job's statePartitions (4 by default) apply at
    # the first start; the stateful operator is named from the plan.
    assert st["partitions"] == 4, st
    metrics = r.metrics()
    assert 'stream_autoscaler_state_rows{job="rate-wordcount",operator="aggregate"}' in metrics

    up = r.action("/executors", {"target": 3})
    print("script: scale 1->3", json.dumps(up["timings"]))
    assert up["state"] == "succeeded" and up["result"]["added"], up

    act = r.action("/repartition", {"partitions": 6})
    print("script: repartition 4->6", json.dumps(act["timings"]), act["result"])
    assert act["state"] == "succeeded", act
    assert act["result"]["rows_before"] == act["result"]["rows_after"] == 100
    st = _after(r, act["result"]["repartition_batch"], 2)
    assert st["partitions"] == 6 and st["phase"] == "Running"

    down = r.action("/executors", {"target": 1})
    print("script: scale 3->1", json.dumps(down["timings"]), down["result"])
    assert down["state"] == "succeeded" and len(down["result"]["killed"]) == 2

    # The driver dies; a new runner runs the same script again, which resumes the checkpoint.
    r2 = _killed_and_resumed(r, start_runner, job, batches=2)
    assert r2.status()["partitions"] == 6
    assert r2.stop() == 0

    # Exactly once: for every word w<k>, the values with remainder k up to its max, once each.
    info = state.inspect(str(cp))
    rows = _latest_counts(local_spark, out)
    assert len(rows) == 100
    wrong = [(w, c, m) for w, c, m in rows if c != m // 100 + 1]
    assert not wrong, f"words counted other than once: {wrong[:5]}"
    total = sum(c for _, c, _ in rows)
    print(f"script: exactly once over {total} records, {info.last_committed_batch + 1} batches")
    assert total > 10_000


def test_an_unmodified_stream_stream_join_scales_repartitions_and_recovers_exactly_once(
        start_runner, tmp_path, local_spark):
    cp, out = tmp_path / "cp", tmp_path / "out"
    job = _script("rate_join.py", cp, out, 400)
    r = start_runner(job)
    st = _after(r, 0, 2)
    metrics = r.metrics()
    assert 'operator="join"' in metrics, "the join's state is not named from the plan"
    up = r.action("/executors", {"target": 2})
    print("script join: scale 1->2", json.dumps(up["timings"]))
    assert up["state"] == "succeeded" and up["result"]["added"], up
    act = r.action("/repartition", {"partitions": 3})
    print("script join: repartition 4->3", json.dumps(act["timings"]), act["result"])
    assert act["state"] == "succeeded", act
    st = _after(r, act["result"]["repartition_batch"], 3)
    assert st["partitions"] == 3
    down = r.action("/executors", {"target": 1})
    print("script join: scale 2->1", json.dumps(down["timings"]), down["result"])
    assert down["state"] == "succeeded" and len(down["result"]["killed"]) == 1, down
    # The driver dies; a new runner runs the script again: both sides' state resumes.
    r = _killed_and_resumed(r, start_runner, job, batches=3)
    assert r.status()["partitions"] == 3
    assert r.stop() == 0
    # A recovery at more state partitions from a checkpoint that ends on a commit: the owner
    # record names the script's file sink, so no one-batch run (it would read the whole pile,
    # uncapped) has to start the script first; the sink's log still gets the repartition's batch
    before = state.inspect(str(cp))
    assert before.uncommitted_batch is None and before.owner.get("fileSink"), before.owner
    at = job.index("--")
    r = start_runner([*job[:at], "--state-partitions", "4", *job[at:]], max_executors=1)
    st = _after(r, before.last_committed_batch or 0, 3)
    assert st["partitions"] == 4, st
    started = next(line for line in r.log_path.read_text().splitlines()
                   if "repartitioned at start" in line)
    print("script join: recovery at 4 state partitions:", started)
    assert "one_batch_run=False" in started, started
    assert r.stop() == 0
    # The output stays readable through Spark's file sink log (the repartition's batch is in
    # it), every impression joined at most once, and none is missing but the last seconds'.
    df = local_spark.read.parquet(str(out))
    ids = sorted(r.ad_id for r in df.select("ad_id").collect())
    print(f"script join: {len(ids)} joined rows, {len(set(ids))} distinct ad ids")
    assert len(ids) > 1000 and len(ids) == len(set(ids)), "an impression joined twice"
    settled = ids[-1] - 2 * 400
    assert set(range(settled)) <= set(ids), "an impression that was clicked never joined"


def test_the_runner_exits_1_naming_the_scripts_line_and_keeps_the_checkpoint(cluster, tmp_path):
    script = tmp_path / "broken_job.py"
    script.write_text("from pyspark.sql import SparkSession\n"
                      "spark = SparkSession.builder.getOrCreate()\n"
                      "df = spark.readStream.format('rate').load()\n"
                      "df.select('no_such_column').writeStream.format('console').start()\n",
                      encoding="utf-8")
    cmd = [sys.executable, "-m", "app.cli", "runner", "--master", cluster.master_url,
           "--control-port", "0", "--metrics-port", "0", "--token-file",
           str(tmp_path / "token"), "--script", str(script), "--checkpoint",
           str(tmp_path / "cp")]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=240)
    err = [line for line in done.stderr.splitlines() if line.startswith("application ")]
    print("runner:", err)
    assert done.returncode == 1, done.stderr[-3000:]
    assert err and err[0].startswith(f"application {script}:4: AnalysisException: "), err
    assert "no_such_column" in err[0] and "Traceback" not in done.stderr


# --- errors: the user's code, named by file and line ------------------------------------------


def _starter(tmp_path: Path, text: str, **spec: Any) -> Any:
    from contracts.streamjob import StreamJob
    from operators.query.application import ApplicationStarter

    script = tmp_path / "user_job.py"
    script.write_text(text, encoding="utf-8")
    doc = {"apiVersion": "stream-autoscaler.io/v1alpha1", "kind": "StreamJob",
           "metadata": {"name": "user-job"},
           "spec": {"application": {"script": str(script)},
                    "checkpoint": {"location": str(tmp_path / "cp")}, **spec}}
    return ApplicationStarter(StreamJob.model_validate(doc), start_timeout=60)


HEADER = "from pyspark.sql import SparkSession\nspark = SparkSession.builder.getOrCreate()\n"
RATE = "spark.readStream.format('rate').load()"


@pytest.mark.parametrize(("body", "line", "problem"), [
    ("x = 1 / 0\n", 3, "ZeroDivisionError: division by zero"),
    ("spark.range(3).write.format('noop').mode('overwrite').save()\n", None,
     "ended without starting a streaming query"),
    ("spark.range(3).writeStream.format('console').start()\n", 3,
     "can be called only on streaming Dataset"),
    ("import sys\nsys.exit(3)\n", 4, "exited with status 3"),
    (f"{RATE}.writeStream.format('console').trigger(continuous='1 second').start()\n", 3,
     "uses a continuous trigger"),
], ids=["raises", "batch-job", "batch-dataframe", "exits", "continuous"])
def test_a_failing_script_is_named_by_file_and_line(tmp_path, local_spark, body, line, problem):
    from operators.query.application import ApplicationError

    starter = _starter(tmp_path, HEADER + body)
    with pytest.raises(ApplicationError) as err:
        starter.start(local_spark)
    where = f"{tmp_path / 'user_job.py'}" + (f":{line}" if line else "")
    print("script error:", err.value)
    assert err.value.where == where and problem in err.value.problem, str(err.value)
    assert not local_spark.streams.active, "a query was left running"


def test_a_second_query_is_refused_naming_its_line_and_the_first_keeps_its_checkpoint(
        tmp_path, local_spark):
    starter = _starter(tmp_path, HEADER + (
        f"q1 = {RATE}.writeStream.format('noop').start()\n"
        f"q2 = {RATE}.writeStream.format('noop').start()\n"
        "q1.awaitTermination()\n"))
    query = starter.start(local_spark)
    try:
        deadline = time.monotonic() + 60
        while starter.failure() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        failure = starter.failure()
        print("second query:", failure)
        assert failure is not None and "user_job.py:4: starts a second streaming query" in failure
        assert len(local_spark.streams.active) == 1
        assert query.name == "user-job", "the job's name was not given to the unnamed query"
    finally:
        query.stop()


def test_what_a_script_does_after_the_runner_stopped_its_query_fails_nothing(
        tmp_path, local_spark):
    # A repartition stops the query; awaitTermination() returns and the script runs on to its
    # end. Whatever it does there (here: raise) must not fail the job the runner resumes.
    starter = _starter(tmp_path, HEADER + (
        f"q = {RATE}.writeStream.format('noop').start()\n"
        "q.awaitTermination()\n"
        "spark.stop()\n"
        "raise RuntimeError('the script ended its way')\n"))
    query = starter.start(local_spark)
    query.stop()
    time.sleep(2)
    assert starter.failure() is None
    again = starter.start(local_spark)  # the script runs again, on the same checkpoint
    try:
        assert again.isActive and local_spark.sparkContext._jsc is not None
    finally:
        again.stop()


def test_the_scripts_own_checkpoint_with_batches_is_not_silently_replaced(tmp_path, local_spark):
    own = tmp_path / "own-cp"
    q = (local_spark.readStream.format("rate").load().writeStream.format("noop")
         .option("checkpointLocation", str(own)).trigger(once=True).start())
    q.awaitTermination(60)
    starter = _starter(tmp_path, HEADER + (
        f"q = {RATE}.writeStream.format('noop').option('checkpointLocation', {str(own)!r})"
        ".start()\nq.awaitTermination()\n"))
    from operators.query.application import ApplicationError

    with pytest.raises(ApplicationError) as err:
        starter.start(local_spark)
    print("own checkpoint:", err.value)
    assert f"the script's own checkpoint {own} holds committed batches" in str(err.value)
    assert state.inspect(str(own)).last_committed_batch == 0, "the script's checkpoint changed"


# --- under the controller -------------------------------------------------------------------


@pytest.mark.closed_loop
def test_the_controller_reads_and_scales_an_unmodified_script_job(cluster, tmp_path):
    """The embedded loop (scrape -> decide -> the runner's endpoint) on a script job started
    from a StreamJob manifest: three executors for a light word count are too many, and the
    engine, reading the plan-named operator, scales in."""
    import secrets

    import yaml

    from contracts.ports import free_port
    from controller.adapters.scrape import ScrapeSource
    from controller.core import Action
    from controller.local.loop import LocalController, PolicyFile
    from controller.local.processes import RunnerProcess

    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "apiVersion": "stream-autoscaler.io/v1alpha1", "kind": "StreamJob",
        "metadata": {"name": "script-loop"},
        "spec": {"application": {"script": str(EXAMPLES / "rate_wordcount.py"),
                                 "args": [str(tmp_path / "out"), "500"]},
                 "trigger": {"intervalSeconds": 2},
                 "checkpoint": {"location": str(tmp_path / "cp")},
                 "executors": {"initial": 3, "cores": 1, "memory": "512m"}}}))
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({
        "apiVersion": "stream-autoscaler.io/v1alpha1", "kind": "ScalingPolicy",
        "metadata": {"name": "script-loop"},
        # At 1 s triggers the fixed per-task cost alone kept 3 executors 40-44% busy (the
        # engine's known overcount); 2 s triggers halve it.
        "spec": {"mode": "enforce", "executors": {"min": 1, "max": 3},
                 "timing": {"evaluationIntervalSeconds": 5, "windowSeconds": 20,
                            "cooldownSeconds": 10, "scaleDownStabilizationSeconds": 20}}}))
    token = tmp_path / "token"
    token.write_text(secrets.token_urlsafe(16))
    (tmp_path / "runner").mkdir()
    runner = RunnerProcess(job, cluster.master_url, tmp_path / "runner", free_port(),
                           free_port(), executors=3, max_executors=3, token_file=token)
    from app.demo import RunnerActuator

    evaluations: list[Any] = []
    source = ScrapeSource(lambda _: f"http://127.0.0.1:{runner.metrics_port}/metrics")
    loop = LocalController("script-loop", PolicyFile(policy), source,
                           RunnerActuator(runner, t0=time.time()),
                           on_evaluation=evaluations.append)
    try:
        runner.start()
        loop.start()
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not any(
                ev.acted and ev.decision.action == Action.SCALE for ev in evaluations):
            time.sleep(2)
        lines = [f"{ev.decision.reason.value}: {ev.decision.message}" for ev in evaluations]
        acted = [ev for ev in evaluations if ev.acted]
        assert acted, "the controller never acted:\n" + "\n".join(lines[-8:])
        d = acted[0].decision
        print("script under the loop:", d.reason.value, d.message)
        assert d.action == Action.SCALE and d.target_executors is not None
        assert d.target_executors < 3, d.message
        seen = [ev.snapshot for ev in evaluations if ev.snapshot is not None]
        assert any(s.arrival_rate for s in seen), "the loop never saw the script's input rate"
        names = {st.name for s in seen for st in s.stages}
        assert "aggregate" in names, f"stages seen: {names}"
        st = runner.client.status()
        deadline = time.monotonic() + 90
        while st.executors.live != d.target_executors and time.monotonic() < deadline:
            time.sleep(1)
            st = runner.client.status()
        assert st.executors.live == d.target_executors, st
    finally:
        loop.stop()
        assert runner.stop() == 0


# --- a module function --------------------------------------------------------------------------


MODULE = '''
def as_dataframe(spark, options):
    return spark.readStream.format("rate").option("rowsPerSecond", options["rate"]).load()

def as_writer(spark, options):
    return as_dataframe(spark, options).writeStream.format("noop")

def as_query(spark, options):
    return as_writer(spark, options).start()

def as_batch(spark, options):
    return spark.range(3)
'''


@pytest.mark.parametrize("function", ["as_dataframe", "as_writer", "as_query"])
def test_a_module_function_returns_a_dataframe_a_writer_or_a_query(
        tmp_path, local_spark, monkeypatch, function):
    from contracts.streamjob import StreamJob
    from operators.query.application import ApplicationStarter

    (tmp_path / "user_functions.py").write_text(MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec: dict[str, Any] = {"application": {"module": f"user_functions:{function}",
                                            "options": {"rate": "50"}},
                            "checkpoint": {"location": str(tmp_path / "cp")}}
    if function == "as_dataframe":
        spec["sink"] = {"type": "noop", "outputMode": "append"}
    job = StreamJob.model_validate({"apiVersion": "stream-autoscaler.io/v1alpha1",
                                    "kind": "StreamJob", "metadata": {"name": "fn-job"},
                                    "spec": spec})
    query = ApplicationStarter(job).start(local_spark)
    try:
        # a batch committed to the job's checkpoint (processAllAvailable would wait for a rate
        # source to run dry, which it never does once its batches outlast a second)
        deadline = time.monotonic() + 120
        while state.inspect(str(tmp_path / "cp")).last_committed_batch is None:
            assert query.isActive, query.exception()
            assert time.monotonic() < deadline, "the query did not write the job's checkpoint"
            time.sleep(0.25)
        assert query.isActive and query.name == "fn-job"
    finally:
        query.stop()


@pytest.mark.parametrize(("target", "problem"), [
    ("user_functions:as_batch", "returned a batch DataFrame"),
    ("user_functions:as_dataframe", "no spec.sink to write it to"),
    ("user_functions:nowhere", "cannot import"),
    ("no_such_module:f", "cannot import"),
])
def test_a_module_function_that_cannot_run_is_named(tmp_path, local_spark, monkeypatch,
                                                    target, problem):
    from contracts.streamjob import StreamJob
    from operators.query.application import ApplicationError, ApplicationStarter

    (tmp_path / "user_functions.py").write_text(MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    job = StreamJob.model_validate({
        "apiVersion": "stream-autoscaler.io/v1alpha1", "kind": "StreamJob",
        "metadata": {"name": "fn-job"},
        "spec": {"application": {"module": target, "options": {"rate": "5"}},
                 "checkpoint": {"location": str(tmp_path / "cp")}}})
    with pytest.raises(ApplicationError) as err:
        ApplicationStarter(job).start(local_spark)
    print("module error:", err.value)
    assert err.value.where == target and problem in err.value.problem, str(err.value)
    assert not local_spark.streams.active
