"""What a managed StreamJob may name in its spec, and what the controller then mounts.

A spec names three kinds of objects of its namespace that the controller puts into the driver
pod and, through Spark, every executor pod: the checkpoint claim
(``spec.checkpoint.volume.claimName``, read-write), the object store's keys
(``spec.checkpoint.credentials.secretName``, into the environment) and the script
(``spec.application.configMap``). Without a rule a job author could have the controller mount
any claim or any Secret with those keys of the namespace — a database's volume, another team's
cloud keys. So each named object must say it is meant for this: labelled
``stream-autoscaler.io/job-reference: "true"``, or owned by the StreamJob itself (the runner
token Secret of an attached job has its own label: ``controller/kube/attach.py``).

Checked when the driver pod is made (the moment a reference is used), so the API server sees
the spec's claim or Secret only once it consents; a missing object or key is named instead of a
pod waiting in ``ContainerCreating`` (tests/unit/kube/test_references.py, against the real API
server tests/integration/k8s/test_controller.py::test_a_job_mounts_only_what_consents).

Pure functions: each returns the problem as a sentence, or None.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from contracts.streamjob import CREDENTIAL_KEYS, StreamJob

REFERENCE_LABEL = "stream-autoscaler.io/job-reference"
"""The label that makes a claim, Secret or ConfigMap usable by the namespace's StreamJobs
(value ``"true"``)."""


@dataclass(frozen=True)
class Reference:
    """One object a spec names: its kind, the field that names it, and the keys it must hold."""

    kind: str
    """``PersistentVolumeClaim``, ``Secret`` or ``ConfigMap``."""
    field: str
    """The spec field, as ``kubectl explain`` spells it."""
    name: str
    keys: tuple[str, ...] = ()
    """Keys the pods read from it (a Secret's variables, a ConfigMap's script)."""


def references(job: StreamJob) -> list[Reference]:
    """What a managed job's pods mount or read, in the order they are checked."""
    out: list[Reference] = []
    ckpt, app = job.spec.checkpoint, job.spec.application
    if ckpt.volume is not None:
        out.append(Reference("PersistentVolumeClaim", "spec.checkpoint.volume.claimName",
                             ckpt.volume.claim_name))
    if ckpt.credentials is not None:
        out.append(Reference("Secret", "spec.checkpoint.credentials.secretName",
                             ckpt.credentials.secret_name, CREDENTIAL_KEYS))
    if app is not None and app.config_map is not None and app.script is not None:
        out.append(Reference("ConfigMap", "spec.application.configMap", app.config_map,
                             (app.script,)))
    return out


def consented(meta: Mapping[str, Any], job_uid: str, label: str) -> bool:
    """Whether an object says it may serve a StreamJob: ``label: "true"``, or an
    ownerReference with the job's uid."""
    if (meta.get("labels") or {}).get(label) == "true":
        return True
    owners = meta.get("ownerReferences") or meta.get("owner_references") or []
    return bool(job_uid) and any((o or {}).get("uid") == job_uid for o in owners)


def consent_problem(ref: Reference, namespace: str, meta: Mapping[str, Any],
                    job_uid: str) -> str | None:
    """Why the job may not use ``ref`` (``meta``: its metadata), or None."""
    if consented(meta, job_uid, REFERENCE_LABEL):
        return None
    return (f"{ref.field}: {ref.kind} {namespace}/{ref.name} is not labelled "
            f"{REFERENCE_LABEL}=true nor owned by this StreamJob: a job mounts only what is "
            f"meant for it (kubectl label {_plural(ref.kind)} {ref.name} -n {namespace} "
            f"{REFERENCE_LABEL}=true)")


def keys_problem(ref: Reference, namespace: str, keys: Iterable[str]) -> str | None:
    """Which of the keys the pods read ``ref`` lacks, or None."""
    have = set(keys)
    missing = [k for k in ref.keys if k not in have]
    if not missing:
        return None
    return (f"{ref.field}: {ref.kind} {namespace}/{ref.name} has no key "
            f"{', '.join(repr(k) for k in missing)} (keys: {', '.join(sorted(have)) or 'none'})")


def _plural(kind: str) -> str:
    return {"PersistentVolumeClaim": "pvc", "Secret": "secret", "ConfigMap": "configmap"}[kind]
