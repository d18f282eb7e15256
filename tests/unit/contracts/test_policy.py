"""Policies: the bundled ones are valid; bad ones fail with file, field path, value and why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from contracts.manifests import ManifestError, load_policy
from contracts.policy import ScalingPolicySpec

ROOT = Path(__file__).resolve().parents[3]
HEADER = "apiVersion: stream-autoscaler.io/v1alpha1\nkind: ScalingPolicy\nmetadata: {name: x}\n"


@pytest.mark.parametrize("path", sorted((ROOT / "policies").glob("*.yaml")), ids=lambda p: p.name)
def test_bundled_policies_validate(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "validate", str(path)]) == 0
    assert ": ok (" in capsys.readouterr().out


BAD = [
    (
        "min above max",
        "spec:\n  executors: {min: 8, max: 4}\n",
        "spec.executors.min (8) must be <= spec.executors.max (4)",
    ),
    (
        "initial outside bounds",
        "spec:\n  executors: {min: 1, max: 4, initial: 9}\n",
        "spec.executors.initial (9) must be within",
    ),
    (
        "utilization target not in (0, 1)",
        "spec:\n  utilization: {target: 1.5}\n",
        "spec.utilization.target (1.5): Input should be less than 1",
    ),
    (
        "band out of order",
        "spec:\n  utilization: {low: 0.8, target: 0.7, high: 0.9}\n",
        "spec.utilization.low (0.8) < spec.utilization.target (0.7)",
    ),
    (
        "unknown key named, with a suggestion",
        "spec:\n  lag: {sloSecs: 3}\n",
        "spec.lag.sloSecs: unknown field (did you mean spec.lag.sloSeconds?)",
    ),
    (
        "bad enum value",
        "spec:\n  mode: yolo\n",
        "spec.mode ('yolo'): Input should be 'enforce' or 'recommend'",
    ),
    ("wrong type", "spec:\n  executors: {max: lots}\n", "spec.executors.max ('lots')"),
    (
        "cooldown not below stabilization",
        "spec:\n  timing: {cooldownSeconds: 300, scaleDownStabilizationSeconds: 120}\n",
        "spec.timing.cooldownSeconds (300.0) must be < spec.timing.scaleDownStabilizationSeconds",
    ),
    ("missing metadata name", "", "metadata.name: required field is missing"),
]


@pytest.mark.parametrize(("name", "body", "expected"), BAD, ids=[b[0] for b in BAD])
def test_invalid_policy_names_file_field_value_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, body: str, expected: str
) -> None:
    f = tmp_path / "x.yaml"
    header = HEADER if body else HEADER.replace("metadata: {name: x}", "metadata: {}")
    f.write_text(header + body)
    assert main(["policy", "validate", str(f)]) == 1
    err = capsys.readouterr().err
    assert f"{f}: {expected}" in err
    assert "Traceback" not in err


def test_yaml_syntax_error_gives_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "broken.yaml"
    f.write_text(HEADER + "spec:\n  executors: [1, 2\n  mode: enforce\n")
    assert main(["policy", "validate", str(f)]) == 1
    err = capsys.readouterr().err
    assert f"{f}:6:7: YAML syntax error" in err


def test_missing_file_and_non_mapping(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="cannot read"):
        load_policy(tmp_path / "nope.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ManifestError, match="expected a ScalingPolicy mapping"):
        load_policy(tmp_path / "list.yaml")


def test_several_files_all_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = ROOT / "policies" / "default.yaml"
    bad = tmp_path / "bad.yaml"
    bad.write_text(HEADER + "spec:\n  executors: {min: 8, max: 4}\n")
    assert main(["policy", "validate", str(good), str(bad)]) == 1
    out = capsys.readouterr()
    assert "default.yaml: ok" in out.out and "bad.yaml: spec.executors.min" in out.err


def test_schema_prints_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "ScalingPolicy"
    assert "executors" in json.dumps(schema)


def test_every_policy_field_is_documented() -> None:
    undocumented = []

    def walk(model: type, prefix: str) -> None:
        for name, f in model.model_fields.items():  # type: ignore[attr-defined]
            sub = f.annotation
            if isinstance(sub, type) and hasattr(sub, "model_fields"):
                walk(sub, f"{prefix}{name}.")
            elif not f.description:
                undocumented.append(prefix + name)

    walk(ScalingPolicySpec, "spec.")
    assert undocumented == []
