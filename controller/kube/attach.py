"""What an attached StreamJob may point the controller at: without these rules a job author
could make the controller read any Secret of the namespace and send it, as a bearer token, to
any URL.

- **URLs**: ``spec.attach.controlUrl`` and ``metricsUrl`` must be http(s) URLs whose host ends
  with one of the controller's allowed host suffixes — by default in-cluster Services
  (``.svc``, ``.svc.cluster.local``); the chart's ``controller.attachAllowedHosts`` or
  ``--attach-allow-host`` add more (the test bed adds 127.0.0.1). The host checked is the one
  the HTTP client connects to: the URL is read by the standard library's parser and by
  urllib3's (what ``requests`` connects with), and anything the two read differently is
  refused, as is anything that invites a difference (a backslash, userinfo, a dot segment, a
  percent escape in the authority, whitespace, control or non-ASCII characters). The clients
  never follow a redirect (``controller/adapters``), so the host checked is the host called
  (tests/unit/kube/test_attach.py::test_urls).
- **The token Secret** must say it is meant for this: labelled
  ``stream-autoscaler.io/runner-token: "true"``, or owned by the StreamJob itself.

Pure functions: each returns the problem as a sentence, or None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from urllib3.util import parse_url

from controller.kube.references import consented

TOKEN_LABEL = "stream-autoscaler.io/runner-token"
"""The label that makes a Secret usable as an attached runner's token (value ``"true"``)."""
DEFAULT_ALLOWED_HOSTS = (".svc", ".svc.cluster.local")
"""In-cluster Services: what an attached runner normally is."""


_AMBIGUOUS = (("@", "userinfo"), ("%", "a percent escape"))
"""Characters in the authority that hide where a URL points: refused outright (a backslash
anywhere is refused before parsing: urllib3 and urlsplit split it differently)."""


def url_problem(field: str, url: str, allowed_hosts: Sequence[str]) -> str | None:
    """Why the controller must not call ``url`` (``field`` names it), or None."""
    shown = url[:100]
    if not url.isascii() or not url.isprintable() or any(c.isspace() for c in url):
        return f"{field} ({shown!r}): whitespace, control or non-ASCII characters"
    if "\\" in url:
        return f"{field} ({shown!r}): a backslash is refused (parsers read it differently)"
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        port = parts.port
        theirs = parse_url(url)
    except ValueError as e:  # urllib3's LocationParseError is a ValueError
        return f"{field} ({shown!r}): not a URL ({type(e).__name__})"
    if parts.scheme not in ("http", "https") or not host:
        return f"{field} ({shown!r}): an http(s) URL with a host is required"
    for char, what in _AMBIGUOUS:
        if char in parts.netloc:
            return f"{field} ({shown!r}): {what} in the host is refused (it hides the host)"
    segments = parts.path.split("/")
    if "." in segments or ".." in segments:
        return f"{field} ({shown!r}): a dot segment ('.' or '..') in the path is refused"
    if ((theirs.scheme or "").lower(), (theirs.host or "").lower(), theirs.port) != (
            parts.scheme, host, port):
        return (f"{field} ({shown!r}): read as host {theirs.host!r} by the HTTP client and "
                f"{host!r} here; refused")
    if not any(host == a.lstrip(".").lower() or host.endswith(_suffix(a))
               for a in allowed_hosts):
        allowed = ", ".join(allowed_hosts) or "none"
        return (f"{field} ({shown!r}): host {host!r} is not one the controller may call "
                f"(allowed: {allowed}; the chart's controller.attachAllowedHosts adds more)")
    return None


def secret_problem(secret_meta: dict[str, Any], job: dict[str, Any]) -> str | None:
    """Why the Secret must not serve as this job's runner token, or None."""
    name = secret_meta.get("name", "?")
    if consented(secret_meta, (job.get("metadata") or {}).get("uid") or "", TOKEN_LABEL):
        return None
    return (f"Secret {name} is not labelled {TOKEN_LABEL}=true nor owned by this StreamJob: "
            "the controller sends a runner token only from a Secret meant for it")


def _suffix(allowed: str) -> str:
    return allowed.lower() if allowed.startswith(".") else "." + allowed.lower()
