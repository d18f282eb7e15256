"""The only module that talks to the Kubernetes API (kopf's rule: only the clients do).

Usage::

    api = KubeApi.from_environment(pool_size=8)   # in-cluster, else $KUBECONFIG
    api.replace_status(job_obj, status_dict)      # optimistic: 409 if the cache was stale
    api.event(job_obj, "Normal", "ScaleOut", "executors 2 -> 4: ...")

Writes carry the object's resourceVersion, so a stale cache gives a 409 Conflict (raised as
:class:`ApiConflict`, retried by the work queue) instead of overwriting someone else's change.

:data:`REQUIRED_PERMISSIONS` lists, per method, the API calls it makes (and the leader election's
Lease calls): the chart's and ``k8s/rbac/``'s rules are exactly these, and tests compare them
(docs/security.md).
"""

from __future__ import annotations

import base64
import datetime as dt
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, cast

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from controller.errors import ControllerError
from controller.kube.informer import Lister
from controller.kube.settings import FINALIZER, GROUP, JOBS, MANAGER, POLICIES, VERSION

Obj = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
REQUEST_TIMEOUT_SECONDS = 10.0
"""One API call; the API server answers in milliseconds unless it is overloaded or gone."""


@dataclass(frozen=True, order=True)
class Permission:
    """One RBAC verb on one resource, and where it is needed."""

    group: str
    """API group; "" is the core group."""
    resource: str
    """Plural, with ``/subresource`` if any."""
    verb: str
    where: Literal["jobs", "lease"] = "jobs"
    """``jobs``: every namespace the controller watches (cluster-wide, or each watched one);
    ``lease``: the leader-election Lease's namespace only."""


def _perms(group: str, resource: str, *verbs: str, where: Literal["jobs", "lease"] = "jobs"
           ) -> tuple[Permission, ...]:
    return tuple(Permission(group, resource, v, where) for v in verbs)


OWNED_KINDS: dict[str, tuple[str, str]] = {
    "ConfigMap": ("", "configmaps"),
    "Secret": ("", "secrets"),
    "Service": ("", "services"),
    "Pod": ("", "pods"),
    "NetworkPolicy": ("networking.k8s.io", "networkpolicies"),
}
"""What :meth:`KubeApi.ensure` creates (and reads back when it exists): (group, plural)."""

REQUIRED_PERMISSIONS: dict[str, tuple[Permission, ...]] = {
    # informers: list, then watch from the list's resourceVersion
    "jobs": _perms(GROUP, JOBS, "list", "watch"),
    "policies": _perms(GROUP, POLICIES, "list", "watch"),
    "replace_status": _perms(GROUP, f"{JOBS}/status", "update"),
    "set_finalizer": _perms(GROUP, JOBS, "patch"),
    # The owned objects' ownerReferences set blockOwnerDeletion, which the
    # OwnerReferencesPermissionEnforcement admission plugin (on in OpenShift and hardened
    # clusters) allows only to who may update the owner's finalizers.
    "ensure": tuple(
        p for group, plural in OWNED_KINDS.values() for p in _perms(group, plural, "create", "get")
    ) + _perms(GROUP, f"{JOBS}/finalizers", "update"),
    "secret": _perms("", "secrets", "get"),
    "secret_value": _perms("", "secrets", "get"),
    "update_config_map_data": _perms("", "configmaps", "patch"),
    "referenced": _perms("", "persistentvolumeclaims", "get") + _perms("", "secrets", "get")
    + _perms("", "configmaps", "get"),
    "read_pod": _perms("", "pods", "get"),
    "delete_pod": _perms("", "pods", "delete"),
    "event": _perms("", "events", "create"),
    # kubernetes.leaderelection's LeaseLock: read_namespaced_lease, create_namespaced_lease,
    # replace_namespaced_lease — nothing else (no list, watch or patch)
    "leader_election": _perms("coordination.k8s.io", "leases", "get", "create", "update",
                              where="lease"),
}
"""Every API call the controller makes, by the method that makes it. The RBAC rules are
exactly the union of these (tests compare the chart and ``k8s/rbac/controller.yaml`` with
:func:`required_rules`)."""


def required_rules(where: Literal["jobs", "lease"]) -> dict[tuple[str, str], set[str]]:
    """(group, resource) -> verbs, over :data:`REQUIRED_PERMISSIONS`."""
    out: dict[tuple[str, str], set[str]] = {}
    for perms in REQUIRED_PERMISSIONS.values():
        for p in perms:
            if p.where == where:
                out.setdefault((p.group, p.resource), set()).add(p.verb)
    return out


class ApiConflict(ControllerError):
    """409: the object changed since we read it (or already exists). Retry from the cache."""


class NotFound(ControllerError):
    """404: the object is gone."""


class NotOwned(ControllerError):
    """An object with the name a StreamJob's object needs exists and is not that job's (no
    ownerReference with its uid): never adopted, patched or deleted."""

    def __init__(self, kind: str, namespace: str, name: str) -> None:
        self.kind, self.name = kind, name
        super().__init__(f"{kind} {namespace}/{name} exists and is not owned by this StreamJob "
                         "(no ownerReference with its uid): rename the job or remove it")


def owned_by(obj: Obj, uid: str) -> bool:
    """Whether ``obj`` carries an ownerReference with ``uid`` (the StreamJob's)."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return bool(uid) and any((r or {}).get("uid") == uid for r in refs)


def _raise(e: ApiException) -> NoReturn:
    if e.status == 409:
        raise ApiConflict(f"{e.reason}") from e
    if e.status == 404:
        raise NotFound(f"{e.reason}") from e
    raise e


class KubeApi:
    """StreamJobs, ScalingPolicies, owned objects and Events."""

    def __init__(self, api_client: client.ApiClient | None = None) -> None:
        self.client = api_client or client.ApiClient()
        self.custom = client.CustomObjectsApi(self.client)
        self.core = client.CoreV1Api(self.client)
        self.networking = client.NetworkingV1Api(self.client)

    @staticmethod
    def from_environment(pool_size: int = 8) -> KubeApi:
        """In-cluster config if there is one, else ``$KUBECONFIG``; also the default config
        (the leader election's Lease lock uses it)."""
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        cfg = client.Configuration.get_default_copy()
        cfg.connection_pool_maxsize = pool_size
        client.Configuration.set_default(cfg)
        return KubeApi(client.ApiClient(cfg))

    # --- list+watch ----------------------------------------------------------------------------

    def lister(self, plural: str, namespace: str | None) -> Lister:
        if namespace:
            return Lister(
                self.custom.list_namespaced_custom_object, (GROUP, VERSION, namespace, plural)
            )
        return Lister(self.custom.list_cluster_custom_object, (GROUP, VERSION, plural))

    def jobs(self, namespace: str | None) -> Lister:
        return self.lister(JOBS, namespace)

    def policies(self, namespace: str | None) -> Lister:
        return self.lister(POLICIES, namespace)

    # --- StreamJob writes --------------------------------------------------------------------

    def replace_status(self, job: Obj, status: Obj) -> Obj:
        """PUT the status subresource at ``job``'s resourceVersion; the new object."""
        meta = job["metadata"]
        body = {
            "apiVersion": job.get("apiVersion", f"{GROUP}/{VERSION}"),
            "kind": job.get("kind", "StreamJob"),
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "resourceVersion": meta["resourceVersion"],
            },
            "spec": job.get("spec", {}),
            "status": status,
        }
        try:
            out = cast(Obj, self.custom.replace_namespaced_custom_object_status(
                GROUP, VERSION, meta["namespace"], JOBS, meta["name"], body,
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            ))
        except ApiException as e:
            _raise(e)
        return out

    def set_finalizer(self, job: Obj, present: bool) -> Obj:
        """Adds or removes our finalizer, at ``job``'s resourceVersion."""
        meta = job["metadata"]
        current = list(meta.get("finalizers") or [])
        wanted = [f for f in current if f != FINALIZER] + ([FINALIZER] if present else [])
        patch = {"metadata": {"finalizers": wanted, "resourceVersion": meta["resourceVersion"]}}
        try:
            out = cast(Obj, self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, meta["namespace"], JOBS, meta["name"], patch,
                _content_type=MERGE_PATCH, _request_timeout=REQUEST_TIMEOUT_SECONDS,
            ))
        except ApiException as e:
            _raise(e)
        return out

    # --- owned objects -------------------------------------------------------------------------

    def secret(self, namespace: str, name: str) -> tuple[Obj, dict[str, str]]:
        """A Secret's metadata (name, labels, ownerReferences) and its data, decoded."""
        try:
            s = self.core.read_namespaced_secret(
                name, namespace, _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        except ApiException as e:
            _raise(e)
        meta = self.client.sanitize_for_serialization(s.metadata) or {}
        data = {k: base64.b64decode(v).decode(errors="replace")
                for k, v in (s.data or {}).items()}
        return meta, data

    def referenced(self, kind: str, namespace: str, name: str) -> tuple[Obj, set[str]]:
        """An object a spec names (``PersistentVolumeClaim``, ``Secret`` or ``ConfigMap``): its
        metadata (labels, ownerReferences) and its keys (a Secret's or ConfigMap's data and
        binaryData; none for a claim), never its values. NotFound if it does not exist."""
        read: Callable[..., Any] = {
            "PersistentVolumeClaim": self.core.read_namespaced_persistent_volume_claim,
            "Secret": self.core.read_namespaced_secret,
            "ConfigMap": self.core.read_namespaced_config_map,
        }[kind]
        try:
            o = read(name, namespace, _request_timeout=REQUEST_TIMEOUT_SECONDS)
        except ApiException as e:
            _raise(e)
        meta = self.client.sanitize_for_serialization(o.metadata) or {}
        keys = set(getattr(o, "data", None) or {}) | set(getattr(o, "binary_data", None) or {})
        return meta, keys

    def secret_value(self, namespace: str, name: str, key: str) -> str:
        """One key of a Secret, decoded. NotFound if the Secret or the key is missing."""
        _, data = self.secret(namespace, name)
        if key not in data:
            raise NotFound(f"Secret {namespace}/{name} has no key {key!r}")
        return data[key].strip()

    def ensure(self, kind: str, namespace: str, body: Obj) -> Obj:
        """Creates ``body`` unless it exists; returns the object (existing ones unchanged).

        An existing object is adopted only when it carries ``body``'s owner (the StreamJob's
        uid in an ownerReference); else :class:`NotOwned` (a job named X must not take over a
        pod ``X-driver`` or a ConfigMap ``X-manifest`` someone else made)."""
        calls: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
            "ConfigMap": (
                self.core.create_namespaced_config_map, self.core.read_namespaced_config_map
            ),
            "Secret": (self.core.create_namespaced_secret, self.core.read_namespaced_secret),
            "Service": (self.core.create_namespaced_service, self.core.read_namespaced_service),
            "Pod": (self.core.create_namespaced_pod, self.core.read_namespaced_pod),
            "NetworkPolicy": (
                self.networking.create_namespaced_network_policy,
                self.networking.read_namespaced_network_policy,
            ),
        }
        create, read = calls[kind]
        try:
            created = create(namespace, body, _request_timeout=REQUEST_TIMEOUT_SECONDS)
        except ApiException as e:
            if e.status != 409:
                raise
            try:
                existing = read(body["metadata"]["name"], namespace)
            except ApiException as e2:
                _raise(e2)
            found = dict(self.client.sanitize_for_serialization(existing))
            uid = next((r.get("uid") for r in body["metadata"].get("ownerReferences") or []), "")
            if not owned_by(found, uid):
                raise NotOwned(kind, namespace, body["metadata"]["name"]) from None
            return found
        return dict(self.client.sanitize_for_serialization(created))

    def update_config_map_data(self, namespace: str, name: str, data: dict[str, str]) -> None:
        try:
            self.core.patch_namespaced_config_map(
                name, namespace, {"data": data}, _content_type=MERGE_PATCH,
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
        except ApiException as e:
            _raise(e)

    def read_pod(self, namespace: str, name: str) -> Obj | None:
        try:
            pod = self.core.read_namespaced_pod(
                name, namespace, _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return dict(self.client.sanitize_for_serialization(pod))

    def delete_pod(self, namespace: str, name: str, grace_seconds: int = 30) -> None:
        """Delete a pod; ``grace_seconds=0`` removes it from the API at once (a pod on a lost
        node, whose kubelet would never confirm a graceful delete)."""
        try:
            self.core.delete_namespaced_pod(
                name, namespace, grace_period_seconds=grace_seconds,
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
        except ApiException as e:
            if e.status != 404:
                raise

    # --- Events ------------------------------------------------------------------------------

    def event(self, job: Obj, type_: str, reason: str, message: str, action: str = "") -> None:
        """A core/v1 Event on the StreamJob (``kubectl describe sj`` and ``get events``)."""
        meta = job["metadata"]
        now = dt.datetime.now(dt.UTC)
        body: Any = {  # the client takes a dict for its CoreV1Event
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta['name']}.{uuid.uuid4().hex[:16]}",
                "namespace": meta["namespace"],
            },
            "involvedObject": {
                "apiVersion": job.get("apiVersion", f"{GROUP}/{VERSION}"),
                "kind": "StreamJob",
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "action": action or reason,
            "source": {"component": MANAGER},
            "reportingComponent": MANAGER,
            "reportingInstance": MANAGER,
            "firstTimestamp": now.isoformat(),
            "lastTimestamp": now.isoformat(),
            "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "count": 1,
        }
        self.core.create_namespaced_event(
            meta["namespace"], body, _request_timeout=REQUEST_TIMEOUT_SECONDS
        )
