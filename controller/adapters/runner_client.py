"""The runner's control endpoint, as the controller uses it (contract: contracts/runner_api.py)."""

from __future__ import annotations

import time
from typing import Any, TypeVar

import requests
from pydantic import BaseModel, ValidationError

from contracts.runner_api import (
    PARAM_OF,
    ROUTE_OF,
    ActionAnswer,
    ActionKind,
    ActionRecord,
    ActionRequest,
    RequestError,
    Route,
    RunnerStatus,
    parse_request,
)
from controller.errors import ControllerError

M = TypeVar("M", bound=BaseModel)

REQUEST_TIMEOUT_SECONDS = 5.0
"""A healthy runner answers /status in milliseconds; 5 s means it is gone or wedged."""
ACTION_TIMEOUT_SECONDS = 180.0
"""Longest an action may run before we stop waiting: a 3M-key repartition took 13 s, a restart
of the session ~10 s, executor registration up to 12 s (docs/spark-facts.md)."""


class RunnerUnavailable(ControllerError):
    """The runner did not answer (process gone, port closed, timeout)."""


class RunnerRefused(ControllerError):
    """The runner answered with an error: 400 (bad value), 401, 409 (busy) or 5xx."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.body = body
        super().__init__(f"HTTP {status}: {body.get('error') or body}")


class RunnerClient:
    """A small client for GET /healthz, GET /status, POST /executors, /repartition, /stop; the
    answers are the models of :mod:`contracts.runner_api`."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url.rstrip("/")
        self._session = requests.Session()
        self._session.headers["Authorization"] = f"Bearer {token}"

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            # never a redirect: the host the URL policy allowed is the only host called
            r = self._session.request(
                method, self.base_url + path, json=body, timeout=REQUEST_TIMEOUT_SECONDS,
                allow_redirects=False,
            )
        except requests.RequestException as e:
            raise RunnerUnavailable(f"{self.base_url}: {type(e).__name__}") from e
        try:
            data = r.json()
        except ValueError:
            data = {"error": r.text[:200]}
        if not isinstance(data, dict):
            data = {"error": f"not a JSON object: {str(data)[:200]}"}
        if r.status_code >= 300:  # a 3xx is an answer we do not follow
            raise RunnerRefused(r.status_code, data)
        return data

    def _parse(self, model: type[M], data: dict[str, Any]) -> M:
        try:
            return model.model_validate(data)
        except ValidationError as e:  # an answer we cannot read is no answer: unknown
            raise RunnerUnavailable(
                f"{self.base_url}: unreadable {model.__name__}: {e.errors()[0]['msg']}"
            ) from e

    def healthy(self) -> bool:
        try:
            self._call("GET", Route.HEALTHZ)
        except (RunnerUnavailable, RunnerRefused):
            return False
        return True

    def status(self) -> RunnerStatus:
        return self._parse(RunnerStatus, self._call("GET", Route.STATUS))

    def submit(self, request: ActionRequest) -> ActionAnswer:
        """POST one action; 202 (started) or 200 (a known ``actionId``: ``duplicate``)."""
        data = self._call("POST", ROUTE_OF[request.kind], request.body())
        return self._parse(ActionAnswer, data)

    def set_executors(self, target: int, action_id: str | None = None) -> ActionAnswer:
        return self.submit(_request(ActionKind.EXECUTORS, target, action_id))

    def repartition(
        self, partitions: int, action_id: str | None = None,
        max_records_per_batch: int | None = None,
    ) -> ActionAnswer:
        """Repartition to ``partitions`` (equal: a restart); the resumed query's batches read at
        most ``max_records_per_batch`` records (None: the job's own cap)."""
        extra = {} if max_records_per_batch is None else {
            "maxRecordsPerBatch": max_records_per_batch}
        return self.submit(_request(ActionKind.REPARTITION, partitions, action_id, extra))

    def stop(self, action_id: str | None = None) -> ActionAnswer:
        return self.submit(_request(ActionKind.STOP, None, action_id))

    def wait_idle(self, timeout: float = ACTION_TIMEOUT_SECONDS) -> ActionRecord | None:
        """Waits until no action is in progress; returns the last action's record."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.status()
            if st.action is None:
                return st.last_action
            time.sleep(0.5)
        raise RunnerUnavailable(f"{self.base_url}: action still running after {timeout:g} s")


def _request(kind: ActionKind, value: int | None, action_id: str | None,
             extra: dict[str, Any] | None = None) -> ActionRequest:
    """The request model, checked as the runner checks it: a value it would refuse with 400 is
    refused here the same way (RunnerRefused), without a round trip."""
    param = PARAM_OF[kind]
    body: dict[str, Any] = {} if param is None else {param: value}
    body.update(extra or {})
    if action_id:
        body["actionId"] = action_id
    try:
        return parse_request(kind, body)
    except RequestError as e:
        raise RunnerRefused(400, e.response().to_wire()) from e
