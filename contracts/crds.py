"""Generates the CRDs and the editor JSON Schemas from the pydantic models.

The models are the single source of truth; ``python -m contracts.crds`` rewrites
``k8s/crds/``, ``helm/stream-autoscaler/crds/`` and ``k8s/schemas/``, and a test fails when the
committed files differ from what this produces (``--check``).

JSON Schema becomes a structural OpenAPI v3 schema: ``$ref`` inlined, ``X | None`` as
``nullable``, discriminated unions merged into one object (the variant's own rules stay in
pydantic and CEL), ``additionalProperties: false`` dropped (the API server prunes or, with
``fieldValidation=Strict``, rejects unknown fields), titles dropped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import yaml

from contracts.api import API_GROUP, API_VERSION
from contracts.policy import ScalingPolicy, ScalingPolicySpec
from contracts.streamjob import StreamJob, StreamJobSpec, StreamJobStatus

ROOT = Path(__file__).resolve().parent.parent
CRD_DIRS = (ROOT / "k8s" / "crds", ROOT / "helm" / "stream-autoscaler" / "crds")
SCHEMA_DIR = ROOT / "k8s" / "schemas"

_DROP = {"title", "additionalProperties", "discriminator", "$defs"}


def _structural(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_structural(n, defs) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].split("/")[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _structural(merged, defs)
    variants = node.get("anyOf") or node.get("oneOf")
    if variants is not None:
        rest = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
        non_null = [v for v in variants if v.get("type") != "null"]
        nullable = len(non_null) < len(variants)
        if len(non_null) == 1:
            merged = _structural({**non_null[0], **rest}, defs)
        else:
            merged = _merge_objects([_structural(v, defs) for v in non_null])
            merged.update(_structural(rest, defs))
        if nullable:
            merged["nullable"] = True
            merged.pop("default", None)
        return merged
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k in _DROP and not (k == "additionalProperties" and isinstance(v, dict)):
            continue
        if k == "const":
            out["enum"] = [v]
            continue
        if k == "exclusiveMinimum":
            out["minimum"], out["exclusiveMinimum"] = v, True
            continue
        if k == "exclusiveMaximum":
            out["maximum"], out["exclusiveMaximum"] = v, True
            continue
        if k == "properties":
            out[k] = {name: _structural(p, defs) for name, p in v.items()}
            continue
        out[k] = _structural(v, defs)
    if out.get("type") == "array" and "prefixItems" in out:
        out["items"] = out.pop("prefixItems")[0]
    if "default" in out and out["default"] is None:
        out.pop("default")
    return out


def _merge_objects(variants: list[dict[str, Any]]) -> dict[str, Any]:
    """One object schema accepting every variant of a discriminated union."""
    props: dict[str, Any] = {}
    required: set[str] = set.intersection(*(set(v.get("required", [])) for v in variants))
    for v in variants:
        for name, p in v.get("properties", {}).items():
            if name in props and "enum" in props[name] and "enum" in p:
                props[name] = {**props[name], "enum": props[name]["enum"] + p["enum"]}
            else:
                props.setdefault(name, p)
    for p in props.values():
        p.pop("default", None)
    desc = " | ".join(v.get("description", "").split("\n")[0] for v in variants)
    return {
        "type": "object",
        "description": desc,
        "properties": props,
        "required": sorted(required),
    }


def openapi(model: type[Any]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of one pydantic model."""
    schema = model.model_json_schema(by_alias=True)
    return _structural(schema, schema.get("$defs", {}))  # type: ignore[no-any-return]


def _crd(
    kind: str,
    plural: str,
    short: list[str],
    spec_model: type[Any],
    status_model: type[Any] | None,
    columns: list[dict[str, Any]],
    description: str,
) -> dict[str, Any]:
    props: dict[str, Any] = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": openapi(spec_model),
    }
    version: dict[str, Any] = {"name": API_VERSION, "served": True, "storage": True}
    if status_model is not None:
        props["status"] = openapi(status_model)
        version["subresources"] = {"status": {}}
    version["schema"] = {
        "openAPIV3Schema": {
            "type": "object",
            "description": description,
            "required": ["spec"],
            "properties": props,
        }
    }
    version["additionalPrinterColumns"] = columns
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{API_GROUP}"},
        "spec": {
            "group": API_GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short,
                "categories": ["stream-autoscaler"],
            },
            "versions": [version],
        },
    }


def _col(name: str, path: str, type_: str = "string", **kw: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, "jsonPath": path, **kw}


def crds() -> dict[str, dict[str, Any]]:
    """File name -> CRD object."""
    streamjob = _crd(
        "StreamJob",
        "streamjobs",
        ["sj"],
        StreamJobSpec,
        StreamJobStatus,
        [
            _col("Phase", ".status.phase"),
            _col("Executors", ".status.executorsDisplay", description="current/target"),
            _col("Partitions", ".status.partitions", "integer"),
            _col("Input/s", ".status.inputRate", "number"),
            _col("Processed/s", ".status.processedRate", "number"),
            _col("Lag", ".status.lagSeconds", "number", description="backlog age (s)"),
            _col("Bottleneck", ".status.bottleneck"),
            _col("Reason", ".status.lastDecision.reason", priority=1),
            _col("Age", ".metadata.creationTimestamp", "date"),
        ],
        "A Spark Structured Streaming job scaled by stream-autoscaler.",
    )
    policy = _crd(
        "ScalingPolicy",
        "scalingpolicies",
        ["sp"],
        ScalingPolicySpec,
        None,
        [
            _col("Mode", ".spec.mode"),
            _col("Min", ".spec.executors.min", "integer"),
            _col("Max", ".spec.executors.max", "integer"),
            _col("Target", ".spec.utilization.target", "number"),
            _col("SLO", ".spec.lag.sloSeconds", "number"),
            _col("Age", ".metadata.creationTimestamp", "date"),
        ],
        "Thresholds and timeouts of stream-autoscaler's decision engine.",
    )
    return {"streamjobs.yaml": streamjob, "scalingpolicies.yaml": policy}


def schemas() -> dict[str, dict[str, Any]]:
    """File name -> JSON Schema for editors (yaml-language-server)."""
    return {
        "streamjob.schema.json": StreamJob.model_json_schema(by_alias=True),
        "scalingpolicy.schema.json": ScalingPolicy.model_json_schema(by_alias=True),
    }


def _models_in(annotation: Any) -> tuple[list[type[Any]], str]:
    """The pydantic models a field holds (unwrapping ``X | None``, ``tuple[X, ...]``, ``list``
    and unions of models) and the suffix its rows take (``[]`` for a sequence)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _models_in(get_args(annotation)[0])
    args = [a for a in get_args(annotation) if a is not type(None)]
    if origin in (tuple, list):
        inner, _ = _models_in(args[0]) if args else ([], "")
        return inner, "[]"
    if args and origin is not Literal and all(_is_model(a) or get_origin(a) for a in args):
        found: list[type[Any]] = []
        suffix = ""
        for a in args:
            inner, suf = _models_in(a) if not _is_model(a) else ([a], "")
            found += inner
            suffix = suffix or suf
        return found, suffix
    return ([annotation], "") if _is_model(annotation) else ([], "")


def _is_model(t: Any) -> bool:
    return isinstance(t, type) and hasattr(t, "model_fields")


def _type_name(annotation: Any) -> str:
    if get_origin(annotation) is Annotated:
        return _type_name(get_args(annotation)[0])
    if get_origin(annotation) is Literal:
        return " \\| ".join(f"`{a}`" for a in get_args(annotation))
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) is not None and len(args) == 1 and len(get_args(annotation)) == 2:
        return f"{_type_name(args[0])} (optional)"
    name = getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")
    return name.replace(" | None", " (optional)")


def _bounds(f: Any) -> str:
    """A field's bounds from its constraints (``ge``/``gt``/``le``/``lt``, lengths)."""
    out = []
    for c in f.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"),
                           ("min_length", "len >="), ("max_length", "len <=")):  # fmt: skip
            v = getattr(c, attr, None)
            if v is not None:
                out.append(f"{sign} {v:g}" if isinstance(v, float) else f"{sign} {v}")
    return ", ".join(out)


def reference_table(title: str, source: str, model: type[Any], prefix: str) -> str:
    """docs/reference/*.md: every field of ``model`` (nested models expanded, each variant of a
    union under its own name) with its type, default and description."""
    lines = [
        f"# {title} reference",
        "",
        f"Generated by `python -m contracts.crds` from `{source}`. Do not edit; `make lint` fails "
        "when it is stale.",
        "",
        "| field | type | default | bounds | description |",
        "|---|---|---|---|---|",
    ]

    def walk(m: type[Any], at: str, seen: tuple[type[Any], ...]) -> None:
        for name, f in m.model_fields.items():
            wire = f.alias or name
            models, suffix = _models_in(f.annotation)
            desc = (f.description or "").replace("|", "\\|").replace("\n", " ")
            if models and not any(x in seen for x in models):
                kinds = ", ".join(x.__name__ for x in models)
                doc = desc or " ".join(
                    (models[0].__doc__ or "").strip().split("\n\n")[0].split()
                ).replace("|", "\\|")
                what = "list of " if suffix else ""
                lines.append(f"| **{at}{wire}{suffix}** | {what}{kinds} | | | {doc} |")
                for x in models:
                    sub = f"{at}{wire}{suffix}" + (f"<{x.__name__}>" if len(models) > 1 else "")
                    walk(x, sub + ".", (*seen, x))
                continue
            default = "" if f.default is None or f.is_required() else f"`{f.default}`"
            if f.default_factory is not None:
                default = ""
            lines.append(
                f"| `{at}{wire}` | {_type_name(f.annotation)} | {default} | {_bounds(f)} | {desc} |"
            )

    walk(model, prefix, (model,))
    return "\n".join(lines) + "\n"


def policy_table() -> str:
    """docs/reference/scalingpolicy.md: every ScalingPolicy field."""
    return reference_table("ScalingPolicy", "contracts/policy.py", ScalingPolicySpec, "spec.")


def streamjob_table() -> str:
    """docs/reference/streamjob.md: every StreamJob spec field."""
    return reference_table("StreamJob", "contracts/streamjob.py", StreamJobSpec, "spec.")


def rendered() -> dict[Path, str]:
    """Every generated file and its exact text."""
    header = "# Generated by `python -m contracts.crds` from the pydantic models. Do not edit.\n"
    out: dict[Path, str] = {}
    for name, obj in crds().items():
        text = header + yaml.safe_dump(obj, sort_keys=False, width=100)
        for d in CRD_DIRS:
            out[d / name] = text
    for name, schema in schemas().items():
        out[SCHEMA_DIR / name] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    out[ROOT / "docs" / "reference" / "scalingpolicy.md"] = policy_table()
    out[ROOT / "docs" / "reference" / "streamjob.md"] = streamjob_table()
    return out


def stale() -> list[Path]:
    """Generated files that are missing or differ from what the models produce."""
    return [
        p
        for p, text in rendered().items()
        if not p.exists() or p.read_text(encoding="utf-8") != text
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m contracts.crds", description=__doc__)
    ap.add_argument("--check", action="store_true", help="exit 1 if a generated file is stale")
    args = ap.parse_args(argv)
    if args.check:
        bad = stale()
        for p in bad:
            print(f"stale: {p.relative_to(ROOT)} (run: python -m contracts.crds)", file=sys.stderr)
        return 1 if bad else 0
    for p, text in rendered().items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
