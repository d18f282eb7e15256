"""``stream-autoscaler validate FILE...``: a dry run for StreamJobs and policies alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main

REPO = Path(__file__).resolve().parents[3]
SHIPPED = sorted([*REPO.glob("k8s/samples/*.yaml"), *REPO.glob("policies/*.yaml")])


def test_every_shipped_manifest_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", *map(str, SHIPPED)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(SHIPPED)
    assert any(": ok (StreamJob burst-count: burst -> [count-by-key] -> noop, managed" in line
               for line in out)
    assert any(": ok (ScalingPolicy default: mode enforce, executors 1..8, lag SLO 30 s)" in line
               for line in out)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("apiVersion: stream-autoscaler.io/v1alpha1\nkind: Deployment\nmetadata: {name: x}\n",
         "kind ('Deployment'): must be StreamJob or ScalingPolicy"),
        ("- 1\n", "kind (None): must be StreamJob or ScalingPolicy"),
        ("apiVersion: stream-autoscaler.io/v1alpha1\nkind: StreamJob\nmetadata: {name: x}\n"
         "spec: {}\n", "spec.checkpoint: required field is missing"),
        ("apiVersion: stream-autoscaler.io/v1alpha1\nkind: StreamJob\nmetadata: {name: x}\n"
         "spec: {checkpoint: {location: /cp}, sink: {type: noop}}\n",
         "a pipeline job needs source, pipeline and sink (missing: source, pipeline)"),
        ("apiVersion: stream-autoscaler.io/v1alpha1\nkind: StreamJob\nmetadata: {name: x}\n"
         "spec: {checkpoint: {location: /cp}, source: {type: burst, trace: t.csv},\n"
         "  application: {script: a.py}}\n",
         "set either application or source, pipeline and sink, not both (also given: source)"),
        ("apiVersion: stream-autoscaler.io/v1alpha1\nkind: StreamJob\nmetadata: {name: x}\n"
         "spec: {checkpoint: {location: /cp}, application: {script: a.py, module: 'a:f'}}\n",
         "spec.application: set exactly one of script or module"),
        ("apiVersion: stream-autoscaler.io/v1alpha1\nkind: StreamJob\nmetadata: {name: x}\n"
         "spec: {checkpoint: {location: /cp}, application: {script: /a/b.py, configMap: b}}\n",
         "spec.application: with configMap, script is the key of the ConfigMap"),
        ("a: [1\n", ":2:1: YAML syntax error"),
    ],
    ids=["foreign-kind", "not-a-mapping", "incomplete-job", "half-a-pipeline", "both-kinds",
         "script-and-module", "configmap-script-path", "yaml-syntax"],
)
def test_a_bad_file_exits_1_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    good = REPO / "policies" / "default.yaml"
    assert main(["validate", str(good), str(bad)]) == 1
    captured = capsys.readouterr()
    assert f"{good}: ok" in captured.out
    assert any(line.startswith(str(bad)) and expected in line
               for line in captured.err.splitlines()), captured.err


def test_cluster_checks_a_managed_checkpoint_as_the_api_server_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``validate --cluster``: the shipped cluster samples pass; a managed job whose checkpoint
    is a bare path (fine for ``runner --job``) is refused naming the file and the field."""
    cluster = sorted(map(str, REPO.glob("k8s/samples/streamjob-*.yaml")))
    assert len(cluster) >= 2
    assert main(["validate", "--cluster", *cluster]) == 0
    local = tmp_path / "local.yaml"
    local.write_text((REPO / "k8s" / "samples" / "wordcount.yaml").read_text())
    assert main(["validate", str(local)]) == 0
    capsys.readouterr()
    assert main(["validate", "--cluster", str(local)]) == 1
    err = capsys.readouterr().err
    assert f"{local}: spec: checkpoint.location (/tmp/stream-autoscaler/wordcount/checkpoint): " \
           "a managed job's checkpoint must be shared" in err, err
