"""What an attached StreamJob may point the controller at (issue #15 item 3)."""

from __future__ import annotations

import pytest

from controller.kube.attach import DEFAULT_ALLOWED_HOSTS, TOKEN_LABEL, secret_problem, url_problem

JOB = {"metadata": {"name": "wc", "namespace": "jobs", "uid": "job-uid"}}


@pytest.mark.parametrize(
    ("url", "allowed", "problem"),
    [
        ("http://wc-runner.jobs.svc:8081", DEFAULT_ALLOWED_HOSTS, None),
        ("http://wc-runner.jobs.svc.cluster.local:8081", DEFAULT_ALLOWED_HOSTS, None),
        ("http://127.0.0.1:8081", (*DEFAULT_ALLOWED_HOSTS, "127.0.0.1"), None),
        ("http://attacker.example:80/steal", DEFAULT_ALLOWED_HOSTS,
         "host 'attacker.example' is not one the controller may call"),
        ("http://10.0.0.7:8081", DEFAULT_ALLOWED_HOSTS, "host '10.0.0.7' is not one"),
        ("http://evilsvc:8081", DEFAULT_ALLOWED_HOSTS, "host 'evilsvc' is not one"),
        ("file:///etc/passwd", DEFAULT_ALLOWED_HOSTS, "an http(s) URL with a host is required"),
        ("http://[::1", DEFAULT_ALLOWED_HOSTS, "not a URL"),
    ],
    ids=["service", "service-fqdn", "loopback-when-allowed", "outside-host", "pod-ip",
         "suffix-without-dot", "file-url", "malformed"],
)
def test_urls(url: str, allowed: tuple[str, ...], problem: str | None) -> None:
    got = url_problem("spec.attach.controlUrl", url, allowed)
    if problem is None:
        assert got is None
    else:
        assert got is not None and problem in got and got.startswith("spec.attach.controlUrl")


@pytest.mark.parametrize(
    ("meta", "allowed"),
    [
        ({"name": "t", "labels": {TOKEN_LABEL: "true"}}, True),
        ({"name": "t", "ownerReferences": [{"uid": "job-uid", "kind": "StreamJob"}]}, True),
        ({"name": "db-password", "labels": {"app": "db"}}, False),
        ({"name": "t", "labels": {TOKEN_LABEL: "yes"}}, False),
        ({"name": "t", "ownerReferences": [{"uid": "another-job"}]}, False),
    ],
    ids=["labelled", "owned-by-the-job", "any-other-secret", "label-not-true", "owned-by-another"],
)
def test_token_secrets(meta: dict[str, object], allowed: bool) -> None:
    problem = secret_problem(meta, JOB)
    assert (problem is None) == allowed
    if not allowed:
        assert f"Secret {meta['name']} is not labelled {TOKEN_LABEL}=true" in (problem or "")
