"""The runner's control endpoint, as the controller uses it (contract: contracts/runner_api.py)."""

from __future__ import annotations

import time
from typing import Any

import requests

REQUEST_TIMEOUT_SECONDS = 5.0
"""A healthy runner answers /status in milliseconds; 5 s means it is gone or wedged."""
ACTION_TIMEOUT_SECONDS = 180.0
"""Longest an action may run before we stop waiting: a 3M-key repartition took 13 s, a restart
of the session ~10 s, executor registration up to 12 s (docs/spark-facts.md)."""


class RunnerUnavailable(Exception):
    """The runner did not answer (process gone, port closed, timeout)."""


class RunnerRefused(Exception):
    """The runner answered with an error: 400 (bad value), 401, 409 (busy) or 5xx."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.body = body
        super().__init__(f"HTTP {status}: {body.get('error') or body}")


class RunnerClient:
    """A small client for GET /healthz, GET /status, POST /executors, /repartition, /stop."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url.rstrip("/")
        self._session = requests.Session()
        self._session.headers["Authorization"] = f"Bearer {token}"

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            r = self._session.request(
                method, self.base_url + path, json=body, timeout=REQUEST_TIMEOUT_SECONDS
            )
        except requests.RequestException as e:
            raise RunnerUnavailable(f"{self.base_url}: {type(e).__name__}") from e
        try:
            data: dict[str, Any] = r.json()
        except ValueError:
            data = {"error": r.text[:200]}
        if r.status_code >= 400:
            raise RunnerRefused(r.status_code, data)
        return data

    def healthy(self) -> bool:
        try:
            self._call("GET", "/healthz")
        except (RunnerUnavailable, RunnerRefused):
            return False
        return True

    def status(self) -> dict[str, Any]:
        return self._call("GET", "/status")

    def set_executors(self, target: int, action_id: str | None = None) -> dict[str, Any]:
        return self._call("POST", "/executors", _with_id({"target": target}, action_id))

    def repartition(self, partitions: int, action_id: str | None = None) -> dict[str, Any]:
        return self._call("POST", "/repartition", _with_id({"partitions": partitions}, action_id))

    def stop(self, action_id: str | None = None) -> dict[str, Any]:
        return self._call("POST", "/stop", _with_id({}, action_id))

    def wait_idle(self, timeout: float = ACTION_TIMEOUT_SECONDS) -> dict[str, Any]:
        """Waits until no action is in progress; returns the last action's record."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.status()
            if not st.get("action"):
                return dict(st.get("lastAction") or {})
            time.sleep(0.5)
        raise RunnerUnavailable(f"{self.base_url}: action still running after {timeout:g} s")


def _with_id(body: dict[str, Any], action_id: str | None) -> dict[str, Any]:
    """The body with ``actionId`` when given: the runner then starts an action only once."""
    return {**body, "actionId": action_id} if action_id else body
