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
        ("n: !!int 'eight'\n", "'eight' is not an integer", 1),
        ("n: !!timestamp 2001-02-30\n", "'2001-02-30' is not a date", 1),
        ("n: !!float 'x'\n", "'x' is not a number", 1),
        ("n: 1:30\n", "'1:30': write numbers in decimal", 1),
        ("n: 0b1000\n", "'0b1000': write numbers in decimal", 1),
        ("n: 017\n", "'017': write numbers in decimal", 1),
        ("n: 1_000\n", "'1_000': write numbers in decimal", 1),
        ("n: 1:30.5\n", "'1:30.5': write numbers in decimal", 1),
    ],
    ids=["alias-bomb", "duplicate-key", "not-utf8", "deep-flow", "deep-block", "huge-int",
         "recursive-alias", "too-large", "int-tag-on-text", "impossible-date", "float-tag-on-text",
         "sexagesimal", "binary", "leading-zero-octal", "underscores", "sexagesimal-float"],
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


def test_a_plain_date_is_text_as_the_api_server_reads_it_and_plus_eight_is_eight() -> None:
    assert load_yaml("d: 2001-02-30\nn: +8\nf: 1e3\n") == {"d": "2001-02-30", "n": 8, "f": 1000.0}


@pytest.mark.parametrize(
    ("spec", "named"),
    [("spec: {executors: {max: 2, \"\\e[2J\\e[31mx\": 1}}\n",
      "spec.executors.\\x1b[2J\\x1b[31mx: unknown field"),
     # at the top level: a "[" in the key once made it look like pydantic's own tag
     ("spec: {}\n\"\\e[2Jx\": 1\n", "\\x1b[2Jx: unknown field")],
    ids=["nested", "top-level"],
)
def test_a_terminal_escape_in_a_key_is_shown_escaped(tmp_path: Path, spec: str,
                                                      named: str) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("apiVersion: stream-autoscaler.io/v1alpha1\nkind: ScalingPolicy\n"
                 "metadata: {name: x}\n" + spec)
    with pytest.raises(ManifestError) as e:
        load_policy(f)
    assert "\x1b" not in str(e.value) and all(p.isprintable() for p in e.value.problems)
    assert any(named in p for p in e.value.problems), e.value.problems
