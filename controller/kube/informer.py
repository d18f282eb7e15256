"""List+watch of one kind into a local cache, resuming from the last resourceVersion.

Usage::

    inf = Informer("StreamJob", lister, on_event=lambda kind, obj: queue.add(key_of(obj)))
    inf.start()               # a daemon thread: list, then watch from the list's resourceVersion
    inf.wait_synced(30)       # the first list is in the cache
    obj = inf.get(("ns", "name"))

A watch that ends (server timeout, dropped connection) resumes from the newest resourceVersion
seen (bookmarks included). A 410 Gone means that version was compacted away: the informer lists
again, reports objects that vanished meanwhile as deleted, and watches from the new list.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

log = structlog.get_logger("stream_autoscaler.informer")

Obj = dict[str, Any]
Key = tuple[str, str]
ListFn = Callable[..., Any]
"""A CustomObjectsApi list method bound to its group/version/plural (see :class:`Lister`)."""


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


@dataclass(frozen=True)
class InformerSettings:
    watch_timeout_seconds: int = 300
    """Server-side watch timeout; the watch is then resumed. client-go uses 5-10 min."""
    error_backoff_seconds: float = 2.0
    """Pause after an API error before listing or watching again."""


@dataclass(frozen=True)
class Lister:
    """How to list and watch one kind: the API method and its positional arguments."""

    func: ListFn
    args: tuple[Any, ...]


class Informer:
    """A cache of one kind, kept current by list+watch, calling ``on_event`` on each change."""

    def __init__(
        self,
        kind: str,
        lister: Lister,
        on_event: Callable[[str, Obj], None],
        settings: InformerSettings | None = None,
        on_restart: Callable[[str], None] | None = None,
    ) -> None:
        self.kind = kind
        self.lister = lister
        self.on_event = on_event
        self.settings = settings or InformerSettings()
        self.on_restart = on_restart or (lambda reason: None)
        self.resource_version: str | None = None
        self._store: dict[Key, Obj] = {}
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._watch: watch.Watch | None = None
        self._thread = threading.Thread(target=self._run, name=f"informer-{kind}", daemon=True)

    # --- the cache ---------------------------------------------------------------------------

    def get(self, key: Key) -> Obj | None:
        with self._lock:
            return self._store.get(key)

    def list_keys(self) -> list[Key]:
        with self._lock:
            return list(self._store)

    def __len__(self) -> int:
        with self._lock:
            return len(self._store)

    # --- the loop ----------------------------------------------------------------------------

    def start(self) -> Informer:
        self._thread.start()
        return self

    def wait_synced(self, timeout: float) -> bool:
        return self._synced.wait(timeout)

    def stop(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.resource_version is None:
                    self._list()
                self._watch_once()
            except ApiException as e:
                if e.status == 410:
                    log.info("watch_expired", kind=self.kind, rv=self.resource_version)
                    self.on_restart("expired")
                    self.resource_version = None  # list again
                    continue
                log.warning("watch_error", kind=self.kind, status=e.status, reason=e.reason)
                self.on_restart("error")
                self._stop.wait(self.settings.error_backoff_seconds)
            except Exception as e:  # connection reset, API server restarting
                if self._stop.is_set():
                    return
                log.warning("watch_error", kind=self.kind, error=f"{type(e).__name__}: {e}")
                self.on_restart("error")
                self._stop.wait(self.settings.error_backoff_seconds)

    def _list(self) -> None:
        result = self.lister.func(*self.lister.args)
        items = {key_of(o): o for o in result.get("items") or []}
        rv = (result.get("metadata") or {}).get("resourceVersion")
        with self._lock:
            gone = [self._store[k] for k in self._store.keys() - items.keys()]
            self._store = dict(items)
        for obj in gone:
            self.on_event("DELETED", obj)
        for obj in items.values():
            self.on_event("ADDED", obj)
        self.resource_version = rv
        self._synced.set()
        log.info("listed", kind=self.kind, objects=len(items), rv=rv)

    def _watch_once(self) -> None:
        w = watch.Watch()
        self._watch = w
        started = time.monotonic()
        for event in w.stream(
            self.lister.func,
            *self.lister.args,
            resource_version=self.resource_version,
            timeout_seconds=self.settings.watch_timeout_seconds,
            allow_watch_bookmarks=True,
        ):
            if self._stop.is_set():
                break
            kind, obj = event.get("type"), event.get("raw_object") or event.get("object")
            if not isinstance(obj, dict):
                continue
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if kind == "BOOKMARK":
                self.resource_version = rv or self.resource_version
                continue
            key = key_of(obj)
            with self._lock:
                if kind == "DELETED":
                    self._store.pop(key, None)
                else:
                    self._store[key] = obj
            if rv:
                self.resource_version = rv
            self.on_event(str(kind), obj)
        log.debug("watch_ended", kind=self.kind, seconds=round(time.monotonic() - started, 1))
