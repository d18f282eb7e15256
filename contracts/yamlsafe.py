"""A YAML reader that cannot be made to hang, exhaust memory or raise a traceback.

    data = load_yaml(raw_bytes_or_text, source="policies/x.yaml")   # YamlLimitError if refused

PyYAML's ``safe_load`` is safe from code execution but not from size: a 514-byte "billion
laughs" document (nine levels of nine aliases) expands to 387 M nodes once anything walks it,
and duplicate keys silently keep the last value. This reader, used for every manifest, policy,
simulator model and hot reload, refuses with the line and column:

- input larger than ``MAX_BYTES``, or not UTF-8;
- more than one document;
- a document whose tree, with every alias expanded, has more than ``MAX_NODES`` nodes, or is
  nested deeper than ``MAX_DEPTH`` (aliases themselves are fine: Kubernetes YAML uses them);
- a mapping with the same key twice (the API server refuses it too);
- an integer longer than ``MAX_INT_DIGITS`` digits (Python refuses to parse > 4,300 anyway);
- a number written in a form only YAML 1.1 reads as one (``1:30`` is 90 here and a string to
  the API server; ``0b1000``, ``017``, ``0o17``, ``0x10``, ``1_000``): write it in decimal;
- a value its tag cannot make (``!!int 'eight'``, ``!!timestamp 2001-02-30``). Plain dates stay
  strings, as the API server reads them (JSON has no dates).

Standard library and PyYAML only.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from contracts.errors import ContractError

MAX_BYTES = 1 << 20
"""1 MiB: a StreamJob or policy is a few kB; etcd stores at most 1.5 MB per object."""
MAX_NODES = 100_000
"""Expanded nodes in one document: ~100x the largest manifest we ship, far below a bomb."""
MAX_DEPTH = 64
"""Nesting depth: our deepest model is ~8 levels; PyYAML itself recurses per level."""
MAX_INT_DIGITS = 30
"""Digits in one integer: every count we accept fits in 19 (int64)."""


class YamlLimitError(ContractError):
    """YAML refused before it could be used; ``line`` and ``column`` are 1-based or None."""

    def __init__(self, what: str, line: int | None = None, column: int | None = None) -> None:
        self.what, self.line, self.column = what, line, column
        super().__init__(what)

    def where(self, source: str) -> str:
        """``source:line:col`` (or just ``source``)."""
        return f"{source}:{self.line}:{self.column}" if self.line is not None else source


def _mark_error(what: str, node: yaml.Node | yaml.Mark | None) -> YamlLimitError:
    mark = node.start_mark if isinstance(node, yaml.Node) else node
    if mark is None:
        return YamlLimitError(what)
    return YamlLimitError(what, mark.line + 1, mark.column + 1)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys and over-long integers."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: PyYAML reports it below
                continue
            if first is not None:
                raise _mark_error(
                    f"duplicate key {str(key)[:80]!r} (first at line "
                    f"{first.start_mark.line + 1}): a key may appear once",
                    key_node,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        value = str(node.value)
        digits = sum(ch.isdigit() for ch in value)
        if digits > MAX_INT_DIGITS:
            raise _mark_error(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})", node)
        if not _DECIMAL_INT.match(value) and _YAML11_INT.match(value):
            raise _mark_error(f"{_shown(value)}: write numbers in decimal (YAML 1.1 reads this "
                              "form as a number, the API server as text or another number)",
                              node)
        try:
            return super().construct_yaml_int(node)
        except ValueError:
            raise _mark_error(f"{_shown(value)} is not an integer", node) from None

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value = str(node.value)
        if ":" in value or "_" in value:
            raise _mark_error(f"{_shown(value)}: write numbers in decimal (YAML 1.1 reads this "
                              "form as a number, the API server as text)", node)
        try:
            return float(super().construct_yaml_float(node))
        except ValueError:
            raise _mark_error(f"{_shown(value)} is not a number", node) from None

    def construct_yaml_timestamp(self, node: yaml.ScalarNode) -> Any:
        try:
            return super().construct_yaml_timestamp(node)
        except ValueError as e:
            raise _mark_error(f"{_shown(str(node.value))} is not a date ({e})", node) from None


_DECIMAL_INT = re.compile(r"^[-+]?(0|[1-9][0-9]*)$")
"""The integers YAML 1.1 (PyYAML) and the API server's YAML read alike."""
_YAML11_INT = re.compile(r"^[-+]?(0[bxo][0-9a-fA-F_]+|[0-9][0-9_:]*)$")
"""What else PyYAML reads as an integer: binary, hex, octal, underscores, sexagesimal."""


def _shown(value: str) -> str:
    """A scalar in an error: at most 60 characters, control characters escaped."""
    return repr(value[:60])


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)
_StrictLoader.add_constructor("tag:yaml.org,2002:float", _StrictLoader.construct_yaml_float)
_StrictLoader.add_constructor("tag:yaml.org,2002:timestamp",
                              _StrictLoader.construct_yaml_timestamp)
# A plain date is text, as for the API server: only an explicit !!timestamp makes a date.
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


# YAML 1.2 floats (what kubectl and the API server read): PyYAML's YAML 1.1 rule takes "1e3"
# (no dot) as a string, so a manifest the API server reads as 1000 would fail here as text.
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _check_flow_depth(text: str) -> None:
    """Refuses flow nesting (``[[[...``) deeper than MAX_DEPTH before PyYAML sees it: its
    scanner revisits every open level per token, so 3,000 levels took seconds. One pass over
    the text, skipping quoted scalars and comments."""
    depth, line, col, quote, comment = 0, 1, 0, "", False
    for ch in text:
        col += 1
        if ch == "\n":
            line, col, comment = line + 1, 0, False
            continue
        if comment:
            continue
        if quote:
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
        elif ch == "#":
            comment = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlLimitError(f"nested deeper than {MAX_DEPTH} levels: refused", line, col)
        elif ch in "]}":
            depth = max(0, depth - 1)


def _check_size(root: yaml.Node) -> None:
    """Counts the nodes of the tree with every alias expanded (memoized per shared node, so
    this costs one visit per distinct node) and its depth; refuses beyond the limits."""
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded nodes, depth)
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            children = _children(node)
            total = 1 + sum(sizes[id(c)][0] for c in children)
            depth = 1 + max((sizes[id(c)][1] for c in children), default=0)
            if total > MAX_NODES:
                raise _mark_error(
                    f"the document expands to more than {MAX_NODES:,} nodes (aliases "
                    "expanded): refused", node)
            if depth > MAX_DEPTH:
                raise _mark_error(f"nested deeper than {MAX_DEPTH} levels: refused", node)
            sizes[key] = (total, depth)
            continue
        if key in sizes:
            continue
        if key in on_path:  # a recursive alias (PyYAML allows it): infinite when expanded
            raise _mark_error("a recursive alias: the document is infinite", node)
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def load_yaml(data: bytes | str) -> Any:
    """One YAML document, within the module's limits. Raises YamlLimitError for what the
    limits refuse, yaml.YAMLError (with marks) for what is not YAML."""
    if isinstance(data, bytes):
        if len(data) > MAX_BYTES:
            raise YamlLimitError(f"{len(data):,} bytes: larger than {MAX_BYTES:,} bytes")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise YamlLimitError(
                f"not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})"
            ) from None
    else:
        text = data
        if len(text) > MAX_BYTES:
            raise YamlLimitError(f"{len(text):,} characters: larger than {MAX_BYTES:,}")
    _check_flow_depth(text)
    loader = _StrictLoader(text)
    try:
        try:
            root = loader.get_single_node()
        except RecursionError:
            raise YamlLimitError(f"nested deeper than {MAX_DEPTH} levels: refused") from None
        if root is None:
            return None
        _check_size(root)
        try:
            return loader.construct_document(root)
        except YamlLimitError:
            raise
        except (ValueError, TypeError, OverflowError) as e:  # a tag its value cannot satisfy
            raise YamlLimitError(f"a value YAML cannot build: {str(e)[:200]}") from None
    finally:
        loader.dispose()
