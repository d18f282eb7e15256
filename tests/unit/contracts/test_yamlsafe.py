"""The YAML reader every loader uses refuses what would hang, eat memory or raise a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.manifests import ManifestError, load_job, load_policy, parse_yaml
from contracts.yamlsafe import MAX_BYTES, YamlLimitError, load_yaml

POLICY = Path(__file__).resolve().parents[3] / "policies" / "default.yaml"


def billion_laughs(levels: int = 9, fan: int = 9) -> str:
    """The 514-byte alias bomb of the hostile-input campaign (nine levels of nine aliases)."""
    lines = ['a0: &a0 "lol"']
    for i in range(1, levels + 1):
        refs = ", ".join(f"*a{i - 1}" for _ in range(fan))
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    ("data", "message", "line"),
    [
        (billion_laughs(), "expands to more than 100,000 nodes", 7),  # 9**6 nodes at a6
        ("a: 1\nb: 2\na: 3\n", "duplicate key 'a' (first at line 1)", 3),
        (b"a: \xff\xfe\n", "not UTF-8 text (byte 0xff at offset 3)", None),
        ("[" * 5000 + "]" * 5000, "nested deeper than 64 levels", None),
        ("x:\n" + "".join("  " * i + "- \n" for i in range(1, 80)), "nested deeper than 64", None),
        ("n: " + "9" * 5000 + "\n", "an integer of 5000 digits", 1),
        ("a: &x [*x]\n", "recursive alias", None),
        (b"a: " + b"x" * MAX_BYTES + b"\n", "larger than 1,048,576 bytes", None),
    ],
    ids=["alias-bomb", "duplicate-key", "not-utf8", "deep-flow", "deep-block", "huge-int",
         "recursive-alias", "too-large"],
)
def test_refused_with_where_and_why(data: str | bytes, message: str, line: int | None) -> None:
    with pytest.raises(YamlLimitError) as e:
        load_yaml(data)
    assert message in str(e.value)
    if line is not None:
        assert e.value.line == line


def test_ordinary_anchors_and_merge_keys_still_load() -> None:
    doc = load_yaml("base: &b {cores: 1, memory: 512m}\nexec:\n  <<: *b\n  cores: 2\n")
    assert doc == {"base": {"cores": 1, "memory": "512m"}, "exec": {"cores": 2, "memory": "512m"}}


def test_more_than_one_document_is_a_syntax_error_with_its_line() -> None:
    with pytest.raises(ManifestError) as e:
        parse_yaml("a: 1\n---\nb: 2\n", "two.yaml")
    assert e.value.problems[0].startswith("two.yaml:2:1: YAML syntax error")


@pytest.mark.timeout(10)
@pytest.mark.parametrize("loader", [load_policy, load_job], ids=["policy", "streamjob"])
def test_loaders_name_the_file_line_and_limit(tmp_path: Path, loader: object) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(billion_laughs())
    with pytest.raises(ManifestError) as e:
        loader(bomb)  # type: ignore[operator]
    assert e.value.problems == [
        f"{bomb}:7:5: the document expands to more than 100,000 nodes (aliases expanded): "
        "refused"
    ]
    binary = tmp_path / "latin1.yaml"
    binary.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ManifestError) as e:
        loader(binary)  # type: ignore[operator]
    assert e.value.problems == [f"{binary}: not UTF-8 text (byte 0xe9 at offset 9)"]


def test_a_shipped_policy_loads_unchanged() -> None:
    assert load_policy(POLICY).metadata.name == "default"
