"""What an attached StreamJob may point the controller at: URLs read alike by every parser and
allowed by host, token Secrets meant for it."""

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
        # parser differentials: what requests would connect to is not what urlsplit reads
        ("http://attacker.example\\@wc-runner.jobs.svc:8081/status", DEFAULT_ALLOWED_HOSTS,
         "a backslash"),
        ("http://wc-runner.jobs.svc:8081\\..\\latest", DEFAULT_ALLOWED_HOSTS, "a backslash"),
        ("http://user:pw@wc-runner.jobs.svc:8081/", DEFAULT_ALLOWED_HOSTS, "userinfo"),
        ("http://wc-runner.jobs.svc:8081/../../latest/meta-data/", DEFAULT_ALLOWED_HOSTS,
         "a dot segment"),
        ("http://wc-runner.jobs.svc:8081/a/./b", DEFAULT_ALLOWED_HOSTS, "a dot segment"),
        ("http://wc-runner.jobs%2esvc:8081/", DEFAULT_ALLOWED_HOSTS, "a percent escape"),
        ("http://wc-runner.jobs.svc:8081/\tx", DEFAULT_ALLOWED_HOSTS, "whitespace"),
        ("http://wc-runner.jobs.svc:8081/ x", DEFAULT_ALLOWED_HOSTS, "whitespace"),
        ("http://wc-runnér.jobs.svc:8081/", DEFAULT_ALLOWED_HOSTS, "non-ASCII"),
        ("http://wc-runner.jobs.svc\x00.evil:8081/", DEFAULT_ALLOWED_HOSTS, "control"),
        ("http://169.254.169.254#@wc-runner.jobs.svc/", DEFAULT_ALLOWED_HOSTS,
         "host '169.254.169.254' is not one"),
        ("http://wc-runner.jobs.svc:99999/", DEFAULT_ALLOWED_HOSTS, "not a URL"),
    ],
    ids=["service", "service-fqdn", "loopback-when-allowed", "outside-host", "pod-ip",
         "suffix-without-dot", "file-url", "malformed", "backslash-userinfo",
         "backslash-path", "userinfo", "dot-dot", "dot", "escaped-dot", "tab", "space",
         "non-ascii", "nul", "fragment-at", "bad-port"],
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
