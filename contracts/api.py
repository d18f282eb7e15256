"""The Kubernetes object envelope shared by every manifest we read.

A manifest is the same YAML in a file and in the API server, so the models accept the fields
the API server adds (uid, resourceVersion, managedFields, ...) in ``metadata`` but nothing
unknown anywhere else.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

API_GROUP = "stream-autoscaler.io"
API_VERSION = "v1alpha1"
GROUP_VERSION = f"{API_GROUP}/{API_VERSION}"


def cel(*rules: tuple[str, str]) -> dict[str, Any]:
    """CEL ``x-kubernetes-validations`` for a model's generated CRD schema: (rule, message).

    They mirror the model's own validators so the API server rejects what pydantic rejects.
    Rules read fields after CRD defaulting, so every field they name has a default.
    """
    return {"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}


class Model(BaseModel):
    """Base of every spec model: camelCase on the wire, unknown keys rejected, immutable."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        validate_default=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The camelCase dict as it appears in YAML and in the API server (unset fields omitted)."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class SpecModel(Model):
    """Base of what a person writes (a policy, a job's spec): strict, so a value means what it
    says. ``true`` is not 1, ``'8'`` is not 8, ``.inf`` and NaN are not numbers (YAML and JSON
    give real numbers; the API server's schema refuses the same). An int is still a float."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False)


class ObjectMeta(BaseModel):
    """Kubernetes object metadata. Only ``name`` is required; server-set fields pass through."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)

    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="Object name (DNS subdomain).",
    )
    namespace: str | None = Field(default=None, description="Namespace; None in a local file.")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Annotations.")
    generation: int | None = Field(default=None, description="Set by the API server.")
    resource_version: str | None = Field(
        default=None, alias="resourceVersion", description="Set by the API server."
    )
    uid: str | None = Field(default=None, description="Set by the API server.")
