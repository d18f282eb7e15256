"""What a person writes means what it says: no coercion, finite numbers, bounded work.

Each row is one defect the hostile-input campaign found in the validator: the value
used to be accepted (``true`` as 1, ``'8'`` as 8, ``.inf`` and 1e308 as numbers, a missing
apiVersion) and then refused by the cluster or fatal to the engine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.manifests import ManifestError, load_job, load_policy

HEADER = "apiVersion: stream-autoscaler.io/v1alpha1\nkind: ScalingPolicy\nmetadata: {name: x}\n"
SAMPLE_JOB = Path(__file__).resolve().parents[3] / "k8s" / "samples" / "wordcount.yaml"


def policy(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    p = tmp_path / "p.yaml"
    p.write_text(header + body)
    return p


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("spec: {executors: {max: true}}\n",
         "spec.executors.max (True): Input should be a valid integer"),
        ("spec: {executors: {max: '8'}}\n",
         "spec.executors.max ('8'): Input should be a valid integer"),
        ("spec: {utilization: {target: '0.7'}}\n",
         "spec.utilization.target ('0.7'): Input should be a valid number"),
        ("spec: {safety: {maxScaleUpFactor: .inf}}\n",
         "spec.safety.maxScaleUpFactor (inf): Input should be a finite number"),
        ("spec: {timing: {staleAfterSeconds: .nan}}\n",
         "spec.timing.staleAfterSeconds (nan): Input should be a finite number"),
        ("spec: {partitions: {restartSeconds: 1e308}}\n",
         "spec.partitions.restartSeconds (1e+308): Input should be less than or equal to 3600"),
        # a hot loop of status writes against the API server (simulate never ended at 5e-324)
        ("spec: {timing: {evaluationIntervalSeconds: 1e-9}}\n",
         "spec.timing.evaluationIntervalSeconds (1e-09): Input should be greater than or equal "
         "to 1"),
        ("spec: {timing: {evaluationIntervalSeconds: 5e-324}}\n",
         "spec.timing.evaluationIntervalSeconds (5e-324): Input should be greater than or "
         "equal to 1"),
        ("spec: {diagnosis: {noProgressSeconds: 1e9}}\n",
         "spec.diagnosis.noProgressSeconds (1000000000.0): Input should be less than or equal"),
        ("spec: {safety: {maxScaleUpFactor: 1000}}\n",
         "spec.safety.maxScaleUpFactor (1000): Input should be less than or equal to 100"),
        ("spec: {executors: {max: 8}, executors: {max: 9}}\n", "duplicate key 'executors'"),
    ],
    ids=["bool-as-int", "string-as-int", "string-as-float", "infinity", "nan",
         "restart-1e308", "interval-1e-9", "interval-denormal", "no-progress-1e9",
         "scale-up-factor-1000", "duplicate-key"],
)
def test_policy_values_are_taken_literally(tmp_path: Path, body: str, expected: str) -> None:
    with pytest.raises(ManifestError) as e:
        load_policy(policy(tmp_path, body))
    assert any(expected in line for line in e.value.problems), e.value.problems


def test_an_int_is_still_a_float_and_yaml_12_exponents_are_numbers(tmp_path: Path) -> None:
    body = "spec: {lag: {sloSeconds: 30, catchUpSeconds: 6e1}}\n"
    spec = load_policy(policy(tmp_path, body)).spec
    assert spec.lag.slo_seconds == 30.0 and spec.lag.catch_up_seconds == 60.0


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("kind: ScalingPolicy\nmetadata: {name: x}\n",
         "apiVersion: required (stream-autoscaler.io/v1alpha1)"),
        ("apiVersion: stream-autoscaler.io/v1alpha1\nmetadata: {name: x}\n",
         "kind: required (ScalingPolicy)"),
    ],
    ids=["no-apiVersion", "no-kind"],
)
def test_a_manifest_says_what_it_is(tmp_path: Path, header: str, expected: str) -> None:
    with pytest.raises(ManifestError) as e:
        load_policy(policy(tmp_path, "spec: {}\n", header=header))
    assert e.value.problems == [f"{tmp_path / 'p.yaml'}: {expected}"]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("intervalSeconds: 1", "intervalSeconds: .inf",
         "spec.trigger.intervalSeconds (inf): Input should be a finite number"),
        ("partitions: 4", "partitions: '4'", "Input should be a valid integer"),
    ],
    ids=["infinite-trigger", "string-partitions"],
)
def test_streamjob_values_are_taken_literally(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    text = SAMPLE_JOB.read_text()
    assert old in text
    p = tmp_path / "job.yaml"
    p.write_text(text.replace(old, new, 1))
    with pytest.raises(ManifestError) as e:
        load_job(p)
    assert any(expected in line for line in e.value.problems), e.value.problems


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("statePartitions: 4", "statePartitions: 4\n  executors: {memory: '0'}",
         "spec.executors.memory ('0'): String should match"),
        ("statePartitions: 4", "statePartitions: 4\n  executors: {memory: 1k}",
         "memory (1k) must be between 450m and 1t"),
        ("trace: traces/sample-burst.csv", "trace: ''",
         "spec.source.trace (''): String should have at"),
        ("keys: 10000", "keys: " + "1" + "0" * 30, ":13:11: an integer of 31 digits"),
        ("keys: 10000", "keys: " + "1" + "0" * 20, "spec.source.keys (100000000000000000000): "),
        ("name: wordcount", "name: " + "w" * 48, "a DNS label of at most 47 characters"),
        ("name: wordcount", "name: 9lives", "metadata.name ('9lives'): a StreamJob name"),
    ],
    ids=["memory-zero", "memory-below-spark-minimum", "empty-trace-path", "keys-1e30", "keys-1e20",
         "name-too-long", "name-starts-with-a-digit"],
)
def test_accepted_but_failing_later_is_now_refused(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    text = SAMPLE_JOB.read_text()
    assert old in text, old
    p = tmp_path / "job.yaml"
    p.write_text(text.replace(old, new, 1))
    with pytest.raises(ManifestError) as e:
        load_job(p)
    assert any(expected in line for line in e.value.problems), e.value.problems


@pytest.mark.parametrize(
    ("sample", "old", "new", "expected"),
    [
        ("wordcount.yaml", "        - fn: count", "        - fn: median",
         "spec.pipeline[1].aggregations[0].fn ('median'): Input should be 'count'"),
        ("wordcount.yaml", "      keys: [word]", "      keyz: [word]",
         "spec.pipeline[1].keyz: unknown field (did you mean spec.pipeline[1].keys?)"),
        ("impressions-clicks.yaml", "          keys: 200", "          keys: -5",
         "spec.pipeline[1].right.source.keys (-5): Input should be greater than or equal to 1"),
    ],
    ids=["aggregation-fn", "unknown-operator-field", "join-right-side"],
)
def test_errors_name_yaml_paths_not_union_tags(
    tmp_path: Path, sample: str, old: str, new: str, expected: str
) -> None:
    """Issue #15: paths named pydantic's discriminators (spec.pipeline.1.aggregate...)."""
    text = (SAMPLE_JOB.parent / sample).read_text()
    assert old in text, old
    p = tmp_path / "job.yaml"
    p.write_text(text.replace(old, new, 1))
    with pytest.raises(ManifestError) as e:
        load_job(p)
    assert any(line.endswith(expected) or expected in line for line in e.value.problems), (
        e.value.problems)
    assert len(e.value.problems) <= 2  # one mistake, one line (and its missing twin)


@pytest.mark.parametrize(
    ("mount", "ok"),
    [("/checkpoints", True), ("/var/lib/stream-autoscaler/checkpoints", True), ("/data/", True),
     ("/etc", False), ("/var/run/secrets/kubernetes.io", False), ("/usr/lib", False),
     ("/opt/stream-autoscaler", False), ("/opt/venv/bin", False), ("/data/../etc", False),
     ("//etc", False), ("/data/./x", False), ("/", False), ("relative", False),
     ("/etcetera", True)],
)
def test_a_mount_path_may_not_shadow_the_system(mount: str, ok: bool) -> None:
    """By the model and, through the same list, by the CRD's CEL rule and pattern."""
    from pydantic import ValidationError

    from contracts.streamjob import CheckpointVolume

    doc = {"claimName": "ckpt", "mountPath": mount}
    if ok:
        CheckpointVolume.model_validate(doc)
    else:
        with pytest.raises(ValidationError) as e:
            CheckpointVolume.model_validate(doc)
        assert "mountPath" in str(e.value) or "mount_path" in str(e.value), str(e.value)
