"""An in-memory Kubernetes API server, behind the same :class:`~reconciler.cluster.api.Cluster`
interface as the real adapter.

It behaves like an API server where the product depends on it: resource versions that change only
when an object changes, generation bumped by spec changes, uids, names validated as the server
validates them (422: a DNS label, subdomain or path segment by kind), namespaces that must exist,
kinds refused until their CRD is applied (and Established), finalizers and deletion timestamps,
server-side apply that tracks the fields each manager owns and removes those a manager stopped
applying, cascading deletion of a CRD's instances and a namespace's objects. Bodies have the
shape a real server gives them, nulls included: a CRD is created with ``status.conditions: null``
(and ``acceptedNames`` empty) and answered so, and is Established only afterwards, as the
apiextensions controllers do; workloads start with ``status: {}``; kinds without a status
(ConfigMaps, custom resources) have none; empty ``labels``, ``annotations`` and ``finalizers``
are left out. A new Namespace gets the ``default`` ServiceAccount and the ``kube-root-ca.crt``
ConfigMap at once (kube-controller-manager's, asynchronous on a server). Refused as a server
refuses them: a ConfigMap value that is no string (a 500, so a ServerError), and with
``require_selectors`` a workload without ``spec.selector`` (422). A dry-run apply answers a
new object with a ``uid`` and creation time of its own, and no resource version. What the
server writes in its own words is stored so
(:func:`~reconciler.core.serverform.server_form`: ``cpu: 1000m`` as ``1``, ``protocol: TCP``
on ports). Tests can set status, and inject faults (errors, latency). Operator workloads become
available (and CRDs Established) right after they are stored unless ``auto_ready``
(``auto_establish``) is off. It can be saved to and loaded from a snapshot (a list of objects, with
field owners kept in ``metadata.managedFields``). Used by tests, benchmarks and offline plans.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from reconciler.cluster.api import (
    NO_IDENTITY,
    ClusterIdentity,
    KindInfo,
    ObjectEvent,
    Permission,
    event_body,
)
from reconciler.core.objects import Body, ObjectRef, crd_kind
from reconciler.core.serverform import server_form
from reconciler.errors import (
    ConflictError,
    InvalidObjectError,
    NotFoundError,
    ReconcilerError,
    ServerError,
    UnknownKindError,
)

FieldPath = tuple[str, ...]

BUILTIN_KINDS: tuple[KindInfo, ...] = (
    KindInfo("", "v1", "Namespace", "namespaces", False),
    KindInfo("", "v1", "ConfigMap", "configmaps", True),
    KindInfo("", "v1", "Secret", "secrets", True),
    KindInfo("", "v1", "ServiceAccount", "serviceaccounts", True),
    KindInfo("", "v1", "Service", "services", True),
    KindInfo("", "v1", "Pod", "pods", True),
    KindInfo("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True),
    KindInfo("apps", "v1", "Deployment", "deployments", True),
    KindInfo("apps", "v1", "StatefulSet", "statefulsets", True),
    KindInfo("apps", "v1", "DaemonSet", "daemonsets", True),
    KindInfo("batch", "v1", "Job", "jobs", True),
    KindInfo("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    KindInfo("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False),
    KindInfo("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    KindInfo("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
    KindInfo("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False),
    KindInfo("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True),
    KindInfo("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", True),
    KindInfo(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        False,
    ),
    KindInfo(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        False,
    ),
    KindInfo(
        "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False
    ),
)
_SERVER_FIELDS = (
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
    "selfLink",
)
_WORKLOADS = ("Deployment", "StatefulSet")


@dataclass(slots=True)
class Fault:
    """An injected failure: ``operation`` ("get", "list", "apply", "patch", "delete" or "*")
    raises ``error`` for the next ``times`` calls that ``match`` (all when ``match`` is None)."""

    operation: str
    error: Exception
    times: int = 1
    match: Callable[[ObjectRef | None], bool] | None = None


_T = TypeVar("_T")


@dataclass(slots=True)
class _Stored:
    body: Body
    owners: dict[str, set[FieldPath]] = field(default_factory=dict)


class InMemoryCluster:
    """See the module docstring. ``writes`` counts calls that changed something."""

    def __init__(
        self,
        *,
        auto_ready: bool = True,
        auto_establish: bool = True,
        clock: Callable[[], datetime] | None = None,
        latency: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
        require_selectors: bool = False,
        identity: ClusterIdentity = NO_IDENTITY,
    ) -> None:
        #: Which cluster this is: none by default (a run names it by how it reached it).
        self.identity = identity
        self.auto_ready = auto_ready
        #: Refuse a workload without ``spec.selector`` as a server does (422); off by default
        #: because many test fixtures and recorded snapshots leave the selector out.
        self.require_selectors = require_selectors
        self.auto_establish = auto_establish
        self.clock = clock or (lambda: datetime.now(UTC))
        self.latency = latency
        self.sleep = sleep
        self.faults: list[Fault] = []
        self.writes = 0
        self.calls: dict[str, int] = {}
        self._objects: dict[tuple[str, str, str, str], _Stored] = {}
        #: Each object's part of :meth:`snapshot_parts`, kept while the object is unchanged.
        self._texts: dict[tuple[str, str, str, str], tuple[_Stored, Any, str]] = {}
        self._kinds: dict[tuple[str, str], KindInfo] = {(k.group, k.kind): k for k in BUILTIN_KINDS}
        self._resource_version = 0
        self._uids = 0
        self._dry_runs = 0
        #: What ``reconciler check`` is told: the identity, the version, what RBAC refuses.
        self.user = "system:serviceaccount:reconciler-system:reconciler"
        self.version = "v1.31.0"
        self.denied: set[Permission] = set()
        #: Events recorded (core/v1 bodies, as the real server stores them), by name.
        self.events: dict[str, Body] = {}

    # -- the Cluster interface ---------------------------------------------------------------

    def get(self, ref: ObjectRef) -> Body | None:
        """See :meth:`reconciler.cluster.api.Cluster.get`."""
        self._enter("get", ref)
        self._served(ref.api_version, ref.kind)
        stored = self._objects.get(self._key(ref))
        return _with_managed_fields(stored) if stored else None

    def list_objects(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> list[Body]:
        """See :meth:`reconciler.cluster.api.Cluster.list_objects`."""
        self._enter("list", None)
        info = self._served(api_version, kind)
        found = []
        for (group, kind_, ns, _), stored in sorted(self._objects.items()):
            if (group, kind_) != (info.group, info.kind):
                continue
            if namespace is not None and ns != namespace:
                continue
            if _labels_match(stored.body, labels or {}):
                found.append(_with_managed_fields(stored))
        return found

    def apply(
        self,
        body: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        dry_run: bool = False,
    ) -> Body:
        """See :meth:`reconciler.cluster.api.Cluster.apply`."""
        ref = ObjectRef.of(body)
        self._enter("apply", ref)
        info = self._served(ref.api_version, ref.kind)
        config = _config_of(body, info)
        ref = ObjectRef.of(config)
        _check_name(ref)
        _check_typed(ref, config)
        self._namespace_exists(info, ref)
        key = self._key(ref)
        existing = self._objects.get(key)
        result = self._applied(existing, config, field_manager, force)
        if self.require_selectors:
            _check_selector(ref, result.body)
        if dry_run:
            return self._dry_run_answer(result, existing)
        if existing is not None and existing.body == result.body:
            existing.owners = result.owners
            return _with_managed_fields(existing)
        return self._store(key, result, existing)

    def patch(self, ref: ObjectRef, merge_patch: Mapping[str, Any]) -> Body:
        """See :meth:`reconciler.cluster.api.Cluster.patch`."""
        self._enter("patch", ref)
        self._served(ref.api_version, ref.kind)
        key = self._key(ref)
        existing = self._objects.get(key)
        if existing is None:
            raise NotFoundError(f"{ref.subject} not found")
        body = _merge_patch(_copied(existing.body), merge_patch)
        _drop_empty_metadata(body.setdefault("metadata", {}))
        if body != existing.body:
            self._store(key, _Stored(body, existing.owners), existing)
            self._finish_deletion(key)
        stored = self._objects.get(key)
        return _with_managed_fields(stored) if stored else _copied(body)

    def delete(self, ref: ObjectRef, *, propagation: str = "Background") -> bool:
        """See :meth:`reconciler.cluster.api.Cluster.delete`."""
        self._enter("delete", ref)
        self._served(ref.api_version, ref.kind)
        key = self._key(ref)
        stored = self._objects.get(key)
        if stored is None:
            return False
        metadata = stored.body["metadata"]
        if metadata.get("finalizers"):
            if "deletionTimestamp" not in metadata:
                metadata["deletionTimestamp"] = self._now()
                self._bump(stored.body)
                self.writes += 1
            return True
        self._remove(key)
        self.writes += 1
        return True

    def kind_info(self, api_version: str, kind: str) -> KindInfo | None:
        """See :meth:`reconciler.cluster.api.Cluster.kind_info`."""
        return self._kinds.get((api_version.rpartition("/")[0], kind))

    def served_kinds(self) -> list[KindInfo]:
        """See :meth:`reconciler.cluster.api.Cluster.served_kinds`."""
        self._enter("discovery", None)
        return sorted(self._kinds.values(), key=lambda k: (k.group, k.kind))

    def kinds_in_group(self, group: str, kind: str) -> KindInfo | None:
        """See :meth:`reconciler.cluster.api.Cluster.kinds_in_group`."""
        return self._kinds.get((group, kind))

    # -- for tests and benchmarks ------------------------------------------------------------

    def record_event(self, event: ObjectEvent, *, component: str) -> None:
        """See :meth:`reconciler.cluster.api.EventSink.record_event`."""
        try:
            self._enter("event", event.ref)
        except ReconcilerError:
            return
        body = event_body(event, component, self._now())
        name = body["metadata"]["name"]
        if name in self.events:  # the same event again: counted, as client-go aggregates
            again = self.events[name]
            body = again | {
                "count": int(again["count"]) + 1,
                "lastTimestamp": body["lastTimestamp"],
            }
        self.events[name] = body

    def server_version(self) -> str:
        """See :meth:`reconciler.cluster.api.Reviewer.server_version`."""
        self._enter("version", None)
        return self.version

    def whoami(self) -> str:
        """See :meth:`reconciler.cluster.api.Reviewer.whoami`."""
        self._enter("review", None)
        return self.user

    def can_i(self, permission: Permission) -> bool:
        """See :meth:`reconciler.cluster.api.Reviewer.can_i`: refused when :attr:`denied`
        holds it, or holds it for every namespace (``namespace`` empty)."""
        self._enter("review", None)
        everywhere = Permission(permission.verb, permission.group, permission.resource)
        return permission not in self.denied and everywhere not in self.denied

    def set_status(self, ref: ObjectRef, status: Mapping[str, Any]) -> None:
        """Replace an object's status, as its controller would (not counted as our write)."""
        stored = self._objects[self._key(ref)]
        stored.body["status"] = _copied(dict(status))
        self._bump(stored.body)

    def establish(self, ref: ObjectRef) -> None:
        """Establish a CRD and serve its kind, as the apiextensions controllers do (for tests
        with ``auto_establish`` off)."""
        stored = self._objects[self._key(ref)]
        version = _storage_version(stored.body)
        assert version is not None, f"{ref.subject} has no version"
        self._establish(stored.body, version)
        self._bump(stored.body)

    def objects(self) -> list[Body]:
        """Every object, sorted by group, kind, namespace and name."""
        return [_copied(s.body) for _, s in sorted(self._objects.items())]

    def snapshot(self) -> list[Body]:
        """Every object with its field owners in ``metadata.managedFields``."""
        return [_with_managed_fields(s) for _, s in sorted(self._objects.items())]

    def snapshot_parts(self, dump: Callable[[Body], str]) -> list[str]:
        """:meth:`snapshot` as texts, each object's made by ``dump`` and kept until the object
        changes (a new stored object or resource version): a snapshot saved after every write
        costs the objects that write changed, not the whole cluster again."""
        parts: list[str] = []
        kept: dict[tuple[str, str, str, str], tuple[_Stored, Any, str]] = {}
        for key, stored in sorted(self._objects.items()):
            version = stored.body["metadata"].get("resourceVersion")
            cached = self._texts.get(key)
            if cached is None or cached[0] is not stored or cached[1] != version:
                cached = (stored, version, dump(_managed_view(stored)))
            kept[key] = cached
            parts.append(cached[2])
        self._texts = kept
        return parts

    def load(self, objects: Sequence[Mapping[str, Any]], *, owned: bool = False) -> None:
        """Add objects from a snapshot: CRDs and Namespaces first, as an API server needs.
        ``owned``: the bodies are the cluster's to keep (just parsed), not copied."""
        ordered: list[Mapping[str, Any]] = sorted(
            objects,
            key=lambda o: (
                o.get("kind") != "CustomResourceDefinition",
                o.get("kind") != "Namespace",
            ),
        )
        for body in ordered:
            self._load_one(dict(body) if owned else _copied(dict(body)))

    # -- internals ---------------------------------------------------------------------------

    def _enter(self, operation: str, ref: ObjectRef | None) -> None:
        self.calls[operation] = self.calls.get(operation, 0) + 1
        if self.latency:
            self.sleep(self.latency)
        for fault in self.faults:
            wanted = fault.operation in (operation, "*") and fault.times > 0
            if wanted and (fault.match is None or fault.match(ref)):
                fault.times -= 1
                raise fault.error

    def _served(self, api_version: str, kind: str) -> KindInfo:
        info = self.kind_info(api_version, kind)
        if info is None:
            raise UnknownKindError(f"the server does not serve {kind} in {api_version}")
        return info

    def _key(self, ref: ObjectRef) -> tuple[str, str, str, str]:
        info = self.kind_info(ref.api_version, ref.kind)
        namespace = ref.namespace if info is None or info.namespaced else ""
        return ref.group, ref.kind, namespace, ref.name

    def _namespace_exists(self, info: KindInfo, ref: ObjectRef) -> None:
        if not info.namespaced:
            return
        if not ref.namespace:
            raise InvalidObjectError(f"{ref.subject}: a namespace is required")
        if ("", "Namespace", "", ref.namespace) not in self._objects:
            raise NotFoundError(f'namespaces "{ref.namespace}" not found')

    def _applied(
        self, existing: _Stored | None, config: Body, manager: str, force: bool
    ) -> _Stored:
        paths = _leaf_paths(config) - _IDENTITY  # the server records no owner of those
        if existing is None:
            _drop_empty_metadata(config["metadata"])
            return _Stored(config, {manager: paths})
        owners = {m: set(p) for m, p in existing.owners.items()}
        body = _copied(existing.body)
        for other, owned in owners.items():
            if other == manager:
                continue
            contested = {p for p in owned & paths if _get(body, p) != _get(config, p)}
            if contested and not force:
                fields = ", ".join(".".join(p) for p in sorted(contested)[:3])
                raise ConflictError(f"{ObjectRef.of(body).subject}: {fields} owned by {other}")
            owned -= contested  # the same value: owned by both, as the server shares it
        for path in owners.get(manager, set()) - paths:
            if not any(path in owned for m, owned in owners.items() if m != manager):
                _delete(body, path)
        _merge(body, config)
        _drop_empty_metadata(body["metadata"])
        owners[manager] = paths
        return _Stored(body, {m: p for m, p in owners.items() if p})

    def _store(self, key: tuple[str, str, str, str], new: _Stored, old: _Stored | None) -> Body:
        """Store ``new`` and answer as a server does: the object as written, before any
        controller (CRD establishing, workload status) reacted to it."""
        body = new.body
        self._stamp(body, old, self._new_uid() if old is None else "")
        self._bump(body)
        self._objects[key] = new
        self.writes += 1
        answer = _with_managed_fields(new)
        self._react(key, body)
        if old is None and body["kind"] == "Namespace":
            self._namespace_defaults(body["metadata"]["name"])
        return answer

    def _new_uid(self) -> str:
        self._uids += 1
        return f"00000000-0000-4000-8000-{self._uids:012d}"

    def _stamp(self, body: Body, old: _Stored | None, uid: str) -> None:
        """What the server sets on an object it is about to store: a new one gets ``uid``, its
        creation time, generation 1 and its initial status; a changed one keeps the old
        metadata, with the generation bumped by a change of its spec."""
        metadata = body["metadata"]
        if old is None:
            metadata["uid"] = uid
            metadata["creationTimestamp"] = self._now()
            metadata["generation"] = 1
            _initial_status(body)
            return
        for name in ("uid", "creationTimestamp", "generation", "deletionTimestamp"):
            if name in old.body["metadata"]:
                metadata[name] = old.body["metadata"][name]
        if _spec_of(body) != _spec_of(old.body):
            metadata["generation"] = int(metadata.get("generation", 1)) + 1

    def _dry_run_answer(self, result: _Stored, existing: _Stored | None) -> Body:
        """A dry-run apply's answer: the object as the server would store it (a new one with a
        uid of its own, never used again, and its creation time), without a resource version
        (a new one) or with the stored one (a change): nothing is stored."""
        self._dry_runs += 1
        self._stamp(result.body, existing, f"00000000-0000-4000-9000-{self._dry_runs:012d}")
        return _with_managed_fields(result)

    def _namespace_defaults(self, namespace: str) -> None:
        """What kube-controller-manager creates in every new Namespace (asynchronously on a
        server, at once here): the ``default`` ServiceAccount and the ``kube-root-ca.crt``
        ConfigMap. Neither is counted as a write of ours."""
        for generated in _namespace_generated(namespace):
            ref = ObjectRef.of(generated)
            key = self._key(ref)
            if key in self._objects:
                continue
            self._stamp(generated, None, self._new_uid())
            self._bump(generated)
            self._objects[key] = _Stored(generated, {_CONTROLLER: _leaf_paths(_owned(generated))})

    def _react(self, key: tuple[str, str, str, str], body: Body) -> None:
        """What controllers would do: serve a new CRD's kind, run a workload."""
        if body["kind"] == "CustomResourceDefinition":
            self._serve_crd(body)
        elif body["kind"] in _WORKLOADS and self.auto_ready:
            wanted = (body.get("spec") or {}).get("replicas")
            replicas = 1 if wanted is None else int(wanted)
            body["status"] = {
                "observedGeneration": body["metadata"]["generation"],
                "replicas": replicas,
                "readyReplicas": replicas,
                "availableReplicas": replicas,
                "updatedReplicas": replicas,
            }

    def _serve_crd(self, crd: Body) -> None:
        """The apiextensions controllers, when ``auto_establish`` is on."""
        version = _storage_version(crd)
        if self.auto_establish and version:
            self._establish(crd, version)

    def _establish(self, crd: Body, version: str) -> None:
        """Names accepted, Established, the kind served in its storage version."""
        group, kind = crd_kind(crd)
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        stored = list((crd.get("status") or {}).get("storedVersions") or [])
        crd["status"] = {
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts"},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"},
            ],
            "acceptedNames": _copied(names),
            "storedVersions": stored if version in stored else [*stored, version],
        }
        plural = str(names.get("plural") or kind.lower() + "s")
        namespaced = spec.get("scope", "Namespaced") == "Namespaced"
        self._kinds[(group, kind)] = KindInfo(group, version, kind, plural, namespaced)

    def _remove(self, key: tuple[str, str, str, str]) -> None:
        stored = self._objects.pop(key)
        body = stored.body
        if body["kind"] == "CustomResourceDefinition":
            group, kind = crd_kind(body)
            self._kinds.pop((group, kind), None)
            for other in [k for k in self._objects if (k[0], k[1]) == (group, kind)]:
                self._objects.pop(other)
        elif body["kind"] == "Namespace":
            name = body["metadata"]["name"]
            for other in [k for k in self._objects if k[2] == name]:
                self._objects.pop(other)

    def _finish_deletion(self, key: tuple[str, str, str, str]) -> None:
        stored = self._objects.get(key)
        if stored is None:
            return
        metadata = stored.body["metadata"]
        if "deletionTimestamp" in metadata and not metadata.get("finalizers"):
            self._remove(key)
            self.writes += 1

    def _bump(self, body: Body) -> None:
        self._resource_version += 1
        body["metadata"]["resourceVersion"] = str(self._resource_version)

    def _now(self) -> str:
        return self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")

    def _load_one(self, data: dict[str, Any]) -> None:
        metadata = data["metadata"] = data.get("metadata") or {}
        managed = metadata.pop("managedFields", None) or []
        owners = {str(e["manager"]): _paths_of_fields(e.get("fieldsV1") or {}) for e in managed}
        ref = ObjectRef.of(data)
        info = self._served(ref.api_version, ref.kind)
        if not info.namespaced:
            metadata.pop("namespace", None)
        self._resource_version += 1
        metadata.setdefault("resourceVersion", str(self._resource_version))
        metadata.setdefault("generation", 1)
        self._uids += 1
        metadata.setdefault("uid", f"00000000-0000-4000-8000-{self._uids:012d}")
        self._objects[self._key(ObjectRef.of(data))] = _Stored(data, owners)
        if data["kind"] == "CustomResourceDefinition":
            self._serve_crd(data)


_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_NAME_RULES: dict[str, tuple[re.Pattern[str], int, str]] = {
    "label": (re.compile(_DNS_LABEL), 63, "a lowercase RFC 1123 label"),
    "subdomain": (
        re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*"),
        253,
        "a lowercase RFC 1123 subdomain",
    ),
    "segment": (re.compile(r"[^/%]+"), 253, "a path segment (no '/' or '%')"),
}


def _check_name(ref: ObjectRef) -> None:
    """``metadata.name`` as the API server validates it (422): a DNS label for a Namespace, a
    path segment for RBAC kinds (``system:...``), a DNS subdomain for the others."""
    if not ref.name:
        raise InvalidObjectError(f"{ref.kind}: metadata.name is required")
    rule = "label" if ref.kind == "Namespace" and not ref.group else "subdomain"
    if ref.group == "rbac.authorization.k8s.io":
        rule = "segment"
    pattern, longest, what = _NAME_RULES[rule]
    if not pattern.fullmatch(ref.name) or len(ref.name) > longest or ref.name in (".", ".."):
        raise InvalidObjectError(
            f'{ref.kind} "{ref.name}" is invalid: metadata.name: must be {what} '
            f"of at most {longest} characters"
        )


#: Maps whose values the API server types as strings: a value of another type fails its typed
#: apply patch with a 500 ("expected string"), which the adapter reads as a ServerError.
_STRING_MAPS = {("", "ConfigMap"): ("data", "binaryData")}
#: Kinds whose ``spec.selector`` the API server requires (422 Invalid without one).
_SELECTED = {("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "DaemonSet")}


def _check_typed(ref: ObjectRef, config: Mapping[str, Any]) -> None:
    """An apply whose values have the wrong type for the kind's schema, as the server refuses
    it: a 500 ("failed to create typed patch object"), translated as a ServerError, as the
    Kubernetes adapter translates that answer."""
    for name in _STRING_MAPS.get((ref.group, ref.kind), ()):
        for key, value in (config.get(name) or {}).items():
            if not isinstance(value, str):
                where = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
                raise ServerError(
                    f"failed to create typed patch object ({where}; {ref.api_version}, "
                    f"Kind={ref.kind}): .{name}.{key}: expected string, got "
                    f"{type(value).__name__} {value!r}",
                    retry_after=10.0,
                )


def _check_selector(ref: ObjectRef, body: Mapping[str, Any]) -> None:
    """A workload as it would be stored needs ``spec.selector``, as the server says (422)."""
    if (ref.group, ref.kind) in _SELECTED and not (body.get("spec") or {}).get("selector"):
        raise InvalidObjectError(
            f'{ref.kind}.{ref.group} "{ref.name}" is invalid: spec.selector: Required value'
        )


_CONTROLLER = "kube-controller-manager"
_ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)


def _namespace_generated(namespace: str) -> list[Body]:
    """The objects kube-controller-manager creates in a new Namespace."""
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": namespace},
    }
    root_ca = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "kube-root-ca.crt",
            "namespace": namespace,
            "annotations": {"kubernetes.io/description": _ROOT_CA_DESCRIPTION},
        },
        "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\n(in-memory)\n-----END CERTIFICATE-----\n"},
    }
    return [account, root_ca]


def _owned(body: Mapping[str, Any]) -> Body:
    """The fields a controller set on an object it created (its metadata's name and namespace
    are the object's identity, owned by nobody)."""
    owned = {k: _copied(v) for k, v in body.items() if k not in ("apiVersion", "kind", "metadata")}
    annotations = (body.get("metadata") or {}).get("annotations")
    if annotations:
        owned["metadata"] = {"annotations": _copied(annotations)}
    return owned


def _config_of(body: Mapping[str, Any], info: KindInfo) -> Body:
    """What an apply sets: the body without status and server-owned metadata."""
    config = server_form(_copied(dict(body)))  # quantities, port protocols: as a server
    config.pop("status", None)
    metadata = config.setdefault("metadata", {})
    for name in _SERVER_FIELDS:
        metadata.pop(name, None)
    if not info.namespaced:
        metadata.pop("namespace", None)
    return config


def _storage_version(crd: Mapping[str, Any]) -> str | None:
    versions = (crd.get("spec") or {}).get("versions") or []
    version = next((v.get("name") for v in versions if v.get("storage")), None)
    if version is None and versions:
        version = versions[0].get("name")
    return str(version) if version else None


def _initial_status(body: Body) -> None:
    """The status a real API server gives an object it creates (before any controller ran)."""
    if body["kind"] == "CustomResourceDefinition":
        # apiextensions: conditions is not omitempty, so a new CRD answers ``null`` there
        version = _storage_version(body)
        body["status"] = {
            "conditions": None,
            "acceptedNames": {"plural": "", "kind": ""},
            "storedVersions": [version] if version else None,
        }
    elif body["kind"] in _WORKLOADS:
        body["status"] = {}


_OMITTED_WHEN_EMPTY = ("labels", "annotations", "finalizers", "ownerReferences")


def _drop_empty_metadata(metadata: Body) -> None:
    """A server leaves empty maps and lists of ``metadata`` out (``omitempty``)."""
    for name in _OMITTED_WHEN_EMPTY:
        if name in metadata and not metadata[name]:
            del metadata[name]


def _labels_match(body: Mapping[str, Any], wanted: Mapping[str, str]) -> bool:
    labels = (body.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in wanted.items())


def _leaf_paths(value: Any, prefix: FieldPath = ()) -> set[FieldPath]:
    """Paths of every leaf of a JSON value; lists are atomic (one leaf)."""
    if isinstance(value, dict) and value:
        paths: set[FieldPath] = set()
        for key, child in value.items():
            paths |= _leaf_paths(child, (*prefix, str(key)))
        return paths
    return {prefix} if prefix else set()


_MISSING = object()
#: The fields that name an object: an API server's ``managedFields`` lists no owner of them.
_IDENTITY = frozenset({("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace")})


def _get(body: Any, path: FieldPath) -> Any:
    for step in path:
        if not isinstance(body, dict) or step not in body:
            return _MISSING
        body = body[step]
    return body


def _delete(body: Body, path: FieldPath) -> None:
    """Remove the field at ``path`` and any map it leaves empty."""
    parents: list[tuple[Body, str]] = []
    node: Any = body
    for step in path[:-1]:
        if not isinstance(node, dict) or step not in node:
            return
        parents.append((node, step))
        node = node[step]
    if isinstance(node, dict):
        node.pop(path[-1], None)
    for parent, step in reversed(parents):
        if parent[step] == {}:
            del parent[step]


def _merge(target: Body, source: Mapping[str, Any]) -> None:
    for key, value in source.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict) and value:
            _merge(target[key], value)
        else:
            target[key] = _copied(value)


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return _copied(patch)
    result = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


def _spec_of(body: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("metadata", "status")}


def _with_managed_fields(stored: _Stored) -> Body:
    """The stored object as a reader gets it: a copy of its own, with ``managedFields``."""
    return _copied(_managed_view(stored))


def _managed_view(stored: _Stored) -> Body:
    """The stored object with ``managedFields``, sharing everything but the two outer levels
    with the stored body: for readers that change nothing (a snapshot's dump)."""
    body = dict(stored.body)
    body["metadata"] = {**body["metadata"], "managedFields": _managed_fields(stored)}
    return body


def _managed_fields(stored: _Stored) -> list[dict[str, Any]]:
    return [
        {
            "manager": manager,
            "operation": "Apply",
            "fieldsType": "FieldsV1",
            "fieldsV1": _fields_of_paths(paths),
        }
        for manager, paths in sorted(stored.owners.items())
    ]


def _copied(value: _T) -> _T:
    """A deep copy of a JSON-shaped value (mappings, lists, scalars), as ``copy.deepcopy`` makes
    one but several times faster (an object's body rarely holds anything else)."""
    if isinstance(value, dict):
        return cast(_T, {key: _copied(child) for key, child in value.items()})
    if isinstance(value, list):
        return cast(_T, [_copied(child) for child in value])
    if value is None or isinstance(value, str | int | float):  # bool is an int
        return value
    return copy.deepcopy(value)  # not JSON-shaped: copied as Python copies anything


def _fields_of_paths(paths: set[FieldPath]) -> dict[str, Any]:
    """Field paths in the API server's ``fieldsV1`` form: ``{"f:spec": {"f:replicas": {}}}``."""
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for step in path:
            node = node.setdefault(f"f:{step}", {})
    return tree


def _paths_of_fields(fields: Mapping[str, Any], prefix: FieldPath = ()) -> set[FieldPath]:
    paths: set[FieldPath] = set()
    for key, child in fields.items():
        if not key.startswith("f:"):
            continue
        path = (*prefix, key[2:])
        inner = _paths_of_fields(child, path) if isinstance(child, Mapping) and child else set()
        paths |= inner or {path}
    return paths
