"""Reading StreamJob and ScalingPolicy manifests from YAML, with errors a person can act on.

Every problem is reported as ``FILE: field.path (value) why``: the file, the camelCase field
path as written in the YAML, the offending value and the reason (:func:`error_lines`, which the
Kubernetes reconciler uses too). A YAML syntax error gives the line and column. Nothing here
raises a bare traceback at the user.
"""

from __future__ import annotations

import difflib
import re
import reprlib
from pathlib import Path
from typing import Any, TypeVar, get_args

import yaml
from pydantic import BaseModel, ValidationError

from contracts.api import GROUP_VERSION
from contracts.errors import ContractError, printable
from contracts.pipeline import Operator
from contracts.policy import ScalingPolicy
from contracts.sources import Source
from contracts.streamjob import CLUSTER_CONTEXT, StreamJob
from contracts.yamlsafe import MAX_BYTES, YamlLimitError, load_yaml

M = TypeVar("M", bound=BaseModel)

_BACKTICK = re.compile(r"`([A-Za-z0-9_.]+)`")


class ManifestError(ContractError):
    """A manifest that cannot be used; ``problems`` holds one line per error."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        # a key or value with a terminal escape sequence is shown escaped, never replayed
        self.problems = [printable(p) for p in problems]
        super().__init__("\n".join(self.problems))


def read_yaml(path: str | Path) -> Any:
    """Parses one YAML document, naming the line and column of a syntax error."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)  # never more than the limit, whatever the file's size
    except OSError as e:
        raise ManifestError(str(p), [f"{p}: cannot read ({e.strerror})"]) from None
    return parse_yaml(raw, str(p))


def parse_yaml(text: str | bytes, source: str) -> Any:
    """Parses YAML within contracts.yamlsafe's limits; ``source`` names it in errors."""
    try:
        return load_yaml(text)
    except YamlLimitError as e:
        raise ManifestError(source, [f"{e.where(source)}: {e.what}"]) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        what = e.problem or e.context or "invalid YAML"
        raise ManifestError(source, [f"{source}{where}: YAML syntax error: {what}"]) from None
    except yaml.YAMLError as e:
        raise ManifestError(source, [f"{source}: YAML error: {e}"]) from None


def validate(model: type[M], data: Any, source: str, *, cluster: bool = False) -> M:
    """Validates ``data`` against ``model``; every error becomes one readable line. ``cluster``:
    as the API server does for a job run in pods (``contracts.streamjob.CLUSTER_CONTEXT``)."""
    if not isinstance(data, dict):
        kind = model.__name__
        raise ManifestError(source, [f"{source}: expected a {kind} mapping, got {_show(data)}"])
    missing = [k for k in ("apiVersion", "kind") if k not in data]
    if missing:  # kubectl refuses such a file; so do we, rather than assume what it is
        want = {"apiVersion": GROUP_VERSION, "kind": model.__name__}
        raise ManifestError(
            source, [f"{source}: {k}: required ({want[k]})" for k in missing]
        )
    try:
        return model.model_validate(data, context={CLUSTER_CONTEXT: cluster})
    except ValidationError as e:
        raise ManifestError(source, error_lines(model, e, source)) from None


def error_lines(model: type[BaseModel], error: ValidationError, source: str = "") -> list[str]:
    """One ``field.path (value) why`` line per error of validating a ``model`` manifest.

    Paths are camelCase, as written in the YAML (``spec.executors.min``); an unknown field gets
    a did-you-mean; ``source`` (a file name), when given, prefixes each line. Every reader of
    manifests reports through this: the file loaders and ``validate`` here, and the Kubernetes
    reconciler for objects read from the API server (its SpecInvalid/PolicyInvalid conditions).
    """
    prefix = f"{source}: " if source else ""
    return [prefix + _problem(model, err) for err in error.errors()]


def load_policy(path: str | Path) -> ScalingPolicy:
    """A ScalingPolicy manifest from a file."""
    return validate(ScalingPolicy, read_yaml(path), str(path))


def load_job(path: str | Path) -> StreamJob:
    """A StreamJob manifest from a file."""
    return validate(StreamJob, read_yaml(path), str(path))


MANIFEST_KINDS: dict[str, type[StreamJob] | type[ScalingPolicy]] = {
    "StreamJob": StreamJob,
    "ScalingPolicy": ScalingPolicy,
}
"""Every kind a manifest file may hold, by its ``kind``."""


def load_manifest(path: str | Path, *, cluster: bool = False) -> StreamJob | ScalingPolicy:
    """A StreamJob or a ScalingPolicy, chosen by the file's ``kind`` (``validate`` uses it);
    ``cluster``: checked as the API server checks what it runs in pods."""
    source = str(path)
    data = read_yaml(path)
    kind = data.get("kind") if isinstance(data, dict) else None
    model = MANIFEST_KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        known = " or ".join(MANIFEST_KINDS)
        raise ManifestError(source, [f"{source}: kind ({_show(kind)}): must be {known}"])
    return validate(model, data, source, cluster=cluster)


def _problem(model: type[BaseModel], err: Any) -> str:
    loc = _yaml_path(err["loc"])
    path = ".".join(loc) or "(top level)"
    kind, msg, value = err["type"], err["msg"], err.get("input")
    if kind == "extra_forbidden":
        # the unknown key as written, even when it looks like a union tag (a "[" in it)
        key = str(err["loc"][-1]) if err["loc"] else ""
        parent = _yaml_path(err["loc"][:-1])
        path = ".".join([*parent, key]) or "(top level)"
        known = _known_fields(model, err["loc"][:-1])
        hint = ""
        close = difflib.get_close_matches(key, known, n=1) if known else []
        if close:
            hint = f" (did you mean {'.'.join([*parent, close[0]])}?)"
        elif known:
            hint = f" (known here: {', '.join(sorted(known))})"
        return f"{path}: unknown field{hint}"
    if kind == "missing":
        return f"{path}: required field is missing"
    if kind == "value_error":
        text = msg.removeprefix("Value error, ")
        prefix = ".".join(loc)
        if _BACKTICK.search(text):
            return _BACKTICK.sub(
                lambda m: f"{prefix}.{m.group(1)}" if prefix else m.group(1), text
            )
        return f"{path}: {text}"
    return f"{path} ({_show(value)}): {msg}"


def _yaml_path(loc: tuple[Any, ...]) -> list[str]:
    """Pydantic's error location as the YAML path a person wrote: without the discriminator
    tags it inserts after a union (``pipeline.1.aggregate.aggregations`` ->
    ``pipeline[1].aggregations``) and with list items as ``[i]``, as kubectl and CEL print."""
    out: list[str] = []
    for i, part in enumerate(loc):
        prev = loc[i - 1] if i else None
        if isinstance(part, str) and (
            part[:1].isupper() or "[" in part
            or (part in _UNION_TAGS and (isinstance(prev, int) or prev == "source"))
        ):
            continue  # a union member's name or tag, not something the YAML says
        if isinstance(part, int) and out:
            out[-1] += f"[{part}]"
        else:
            out.append(str(part))
    return out


_UNION_MEMBERS: dict[str, type[BaseModel]] = {
    m.model_fields["type"].default: m for u in (Source, Operator) for m in get_args(get_args(u)[0])
}
"""The ``type`` values of the source and operator unions -> their model (pydantic puts the tag
in error paths)."""
_UNION_TAGS = frozenset(_UNION_MEMBERS)

_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxother, _REPR.maxlevel = 60, 60, 2


def _show(value: object) -> str:
    """A bounded repr: a huge or deeply nested value costs nothing to show."""
    text = _REPR.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _known_fields(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Wire names of the fields valid at ``loc`` (best effort; [] if it cannot tell)."""
    current: Any = model
    for i, part in enumerate(loc):
        if isinstance(part, int):
            continue
        if part in _UNION_MEMBERS and (i and (isinstance(loc[i - 1], int)
                                              or loc[i - 1] == "source")):
            current = _UNION_MEMBERS[part]  # the member the tag selects
            continue
        if part[:1].isupper() or "[" in part:
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        field = next(
            (f for n, f in current.model_fields.items() if (f.alias or n) == part or n == part),
            None,
        )
        if field is None:
            return []
        current = _model_in(field.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [f.alias or n for n, f in current.model_fields.items()]
    return []


def _model_in(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
