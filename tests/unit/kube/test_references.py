"""What a managed StreamJob may name: each claim, Secret and ConfigMap of its spec, found with
the keys its pods read and labelled for StreamJobs or owned by the job; the same consent rule
as an attached job's runner token (controller/kube/attach.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from contracts.streamjob import CREDENTIAL_KEYS, StreamJob
from controller.kube.attach import TOKEN_LABEL, secret_problem
from controller.kube.references import (
    REFERENCE_LABEL,
    Reference,
    consent_problem,
    keys_problem,
    references,
)
from tests.unit.kube.factories import JOB

UID = "job-uid"
CLAIM = Reference("PersistentVolumeClaim", "spec.checkpoint.volume.claimName", "ck")
KEYS = Reference("Secret", "spec.checkpoint.credentials.secretName", "s3-keys", CREDENTIAL_KEYS)


def _job(**spec: Any) -> StreamJob:
    doc = copy.deepcopy(JOB)
    if "application" in spec:  # a script replaces the declared pipeline
        for key in ("source", "pipeline", "sink"):
            doc["spec"].pop(key, None)
    doc["spec"].update(spec)
    return StreamJob.model_validate(doc)


def test_every_object_a_spec_names_is_a_reference() -> None:
    on_claim = _job(checkpoint={"location": "/ck/wc",
                                "volume": {"claimName": "ck", "mountPath": "/ck"}},
                    application={"configMap": "wc-script", "script": "wc.py"})
    assert references(on_claim) == [
        CLAIM, Reference("ConfigMap", "spec.application.configMap", "wc-script", ("wc.py",))]
    on_s3 = _job(checkpoint={"location": "s3a://bucket/wc",
                             "credentials": {"secretName": "s3-keys"}})
    assert references(on_s3) == [KEYS]


@pytest.mark.parametrize(
    ("meta", "allowed"),
    [
        ({"labels": {REFERENCE_LABEL: "true"}}, True),
        ({"ownerReferences": [{"uid": UID}]}, True),
        ({}, False),
        ({"labels": {REFERENCE_LABEL: "True"}}, False),      # the value is exactly "true"
        ({"labels": {REFERENCE_LABEL: ""}}, False),
        ({"labels": {TOKEN_LABEL: "true"}}, False),          # a runner token is not a reference
        ({"ownerReferences": [{"uid": "another-job"}]}, False),
        ({"ownerReferences": [{"uid": ""}]}, False),
    ],
)
def test_an_object_consents_by_label_or_ownership(meta: dict[str, Any], allowed: bool) -> None:
    problem = consent_problem(CLAIM, "jobs", meta, UID)
    if allowed:
        assert problem is None
    else:
        assert problem is not None
        assert problem.startswith("spec.checkpoint.volume.claimName: PersistentVolumeClaim "
                                  "jobs/ck is not labelled stream-autoscaler.io/job-reference")
        assert f"kubectl label pvc ck -n jobs {REFERENCE_LABEL}=true" in problem


def test_a_job_without_a_uid_owns_nothing() -> None:
    assert consent_problem(CLAIM, "jobs", {"ownerReferences": [{"uid": ""}]}, "") is not None


def test_the_keys_the_pods_read_must_be_there() -> None:
    assert keys_problem(KEYS, "jobs", {*CREDENTIAL_KEYS, "extra"}) is None
    assert keys_problem(KEYS, "jobs", {"AWS_ACCESS_KEY_ID"}) == (
        "spec.checkpoint.credentials.secretName: Secret jobs/s3-keys has no key "
        "'AWS_SECRET_ACCESS_KEY' (keys: AWS_ACCESS_KEY_ID)")
    assert "(keys: none)" in (keys_problem(KEYS, "jobs", set()) or "")
    assert keys_problem(CLAIM, "jobs", set()) is None  # a claim has no keys to read


def test_a_reference_label_does_not_make_a_runner_token() -> None:
    """Object-store keys a job may mount are not thereby a token the controller sends to a URL
    (tests/unit/kube/test_attach.py::test_token_secrets holds the token's own rule)."""
    job = {"metadata": {"uid": UID}}
    assert secret_problem({"name": "t", "labels": {REFERENCE_LABEL: "true"}}, job) is not None
