"""An in-memory Kubernetes API server, behind the same :class:`~reconciler.cluster.api.Cluster`
interface as the real adapter.

It behaves like an API server where the product depends on it: resource versions that change only
when an object changes, generation bumped by spec changes, uids, names validated as the server
validates them (422: a DNS label, subdomain or path segment by kind), namespaces that must exist,
kinds refused until their CRD is applied (and Established), a kind served at each served
version of its CRD (HorizontalPodAutoscaler at ``autoscaling/v2`` and ``v1``) and refused at
another, one object read, listed and written at any of them (L12), server-side apply that tracks
the fields each manager owns and removes those a manager stopped applying, cascading deletion of
a CRD's instances and a namespace's objects, a removed API (``policy/v1beta1`` and the others
a Kubernetes 1.36 server no longer serves) refused, a change of a Job's ``spec.template``
refused as immutable (422, ``field is immutable``), and finalizers as the server keeps them: a
deleted object with finalizers stays Terminating (``deletionTimestamp``, grace period 0) until a
patch or an apply empties them, none may be added meanwhile, and a CRD or Namespace whose
content is held so stays Terminating until that content is gone. Bodies have the
shape a real server gives them, nulls included: a CRD is created with ``status.conditions: null``
(and ``acceptedNames`` empty) and answered so, and is Established only afterwards, as the
apiextensions controllers do; workloads start with ``status: {}``; kinds without a status
(ConfigMaps, custom resources) have none; empty ``labels``, ``annotations`` and ``finalizers``
are left out. A new Namespace gets the ``default`` ServiceAccount and the ``kube-root-ca.crt``
ConfigMap at once (kube-controller-manager's, asynchronous on a server). Refused as a server
refuses them: a ConfigMap value that is no string (a 500, so a ServerError), and with
``require_selectors`` a workload without ``spec.selector`` (422). A dry-run apply answers a
new object with a ``uid`` and creation time of its own, and no resource version; it stores
nothing and is counted as ``dry-run``, not ``apply``, in ``calls``. What the
server writes in its own words is stored so
(:func:`~reconciler.core.serverform.server_form`: ``cpu: 1000m`` as ``1``, ``protocol: TCP``
on ports). Tests can set status, and inject faults (errors, latency). Operator workloads become
available (and CRDs Established) right after they are stored unless ``auto_ready``
(``auto_establish``) is off. It can be saved to and loaded from a snapshot (a list of objects, with
field owners kept in ``metadata.managedFields``). Used by tests, benchmarks and offline plans.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from reconciler.cluster.api import (
    NO_IDENTITY,
    ClusterIdentity,
    KindInfo,
    ObjectEvent,
    Permission,
    WatchEventType,
    event_body,
)
from reconciler.cluster.memory_fields import (
    IDENTITY,
    SnapshotTexts,
    Stored,
    applied,
    copied,
    drop_empty_metadata,
    leaf_paths,
    owners_of,
    patched,
    with_managed_fields,
)
from reconciler.cluster.memory_review import MemoryReviewer
from reconciler.cluster.memory_rules import (
    CONTROLLER,
    WORKLOADS,
    at_version,
    available_status,
    check_finalizers,
    check_immutable,
    check_name,
    check_selector,
    check_typed,
    config_of,
    controller_owned,
    counted_event,
    established,
    labels_match,
    load_order,
    namespace_generated,
    served_versions,
    stamp,
    storage_version,
    terminating,
)
from reconciler.cluster.memory_watch import Journal, MemoryWatches
from reconciler.core.objects import Body, ObjectRef, crd_kind
from reconciler.errors import (
    ConflictError,
    InvalidObjectError,
    NotFoundError,
    ReconcilerError,
    UnknownKindError,
)

FieldPath = tuple[str, ...]
#: Where an object is stored: group, kind, namespace, name.
Key = tuple[str, str, str, str]

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
    KindInfo("batch", "v1", "CronJob", "cronjobs", True),
    KindInfo("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    KindInfo("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False),
    KindInfo("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    KindInfo("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
    KindInfo("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False),
    KindInfo("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True),
    KindInfo("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", True),
    KindInfo("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True),
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

#: Built-in kinds served at more than one version of their group, the preferred first.
BUILTIN_VERSIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("autoscaling", "HorizontalPodAutoscaler"): ("v2", "v1"),
}


@dataclass(slots=True)
class Fault:
    """An injected failure: ``operation`` ("get", "list", "apply", "dry-run", "patch", "delete"
    or "*") raises ``error`` for the next ``times`` calls that ``match`` (all when ``match`` is
    None)."""

    operation: str
    error: Exception
    times: int = 1
    match: Callable[[ObjectRef | None], bool] | None = None


class InMemoryCluster(MemoryWatches, MemoryReviewer):
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
        self._objects: dict[tuple[str, str, str, str], Stored] = {}
        #: Each object's part of :meth:`snapshot_parts`, kept while the object is unchanged.
        self._texts = SnapshotTexts()
        self._kinds: dict[tuple[str, str], KindInfo] = {(k.group, k.kind): k for k in BUILTIN_KINDS}
        #: The versions each kind is served at (a CRD's served versions), the preferred first.
        self._versions: dict[tuple[str, str], tuple[str, ...]] = {
            (k.group, k.kind): BUILTIN_VERSIONS.get((k.group, k.kind), (k.version,))
            for k in BUILTIN_KINDS
        }
        self._resource_version = 0
        self._uids = 0
        self._dry_runs = 0
        #: What ``reconciler check`` is told: the identity, the version, what RBAC refuses.
        self.user = "system:serviceaccount:reconciler-system:reconciler"
        self.version = "v1.31.0"
        self.denied: set[Permission] = set()
        self.only_in: dict[Permission, set[str]] = {}
        #: Events recorded (core/v1 bodies, as the real server stores them), by name.
        self.events: dict[str, Body] = {}
        #: Every change, for watches (:mod:`reconciler.cluster.memory_watch`).
        self.journal = Journal()

    # -- the Cluster interface ---------------------------------------------------------------

    def get(self, ref: ObjectRef) -> Body | None:
        """See :meth:`reconciler.cluster.api.Cluster.get`."""
        self._enter("get", ref)
        self._served(ref.api_version, ref.kind)
        stored = self._objects.get(self._key(ref))
        return at_version(with_managed_fields(stored), ref.api_version) if stored else None

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
        self._refuse_unless_allowed("list", info, namespace)
        found = []
        for (group, kind_, ns, _), stored in sorted(self._objects.items()):
            if (group, kind_) != (info.group, info.kind):
                continue
            if namespace is not None and ns != namespace:
                continue
            if labels_match(stored.body, labels or {}):
                found.append(at_version(with_managed_fields(stored), api_version))
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
        self._enter("dry-run" if dry_run else "apply", ref)  # a dry-run writes nothing
        info = self._served(ref.api_version, ref.kind)
        config = config_of(body, info)
        ref = ObjectRef.of(config)
        check_name(ref)
        check_typed(ref, config)
        self._namespace_exists(info, ref)
        key = self._key(ref)
        existing = self._objects.get(key)
        written = config_of(body, info, as_written=True)
        result = applied(self._at(existing, ref.api_version), config, field_manager, force, written)
        if existing is not None:
            check_immutable(ref, existing.body, result.body)
        if self.require_selectors:
            check_selector(ref, result.body)
        check_finalizers(ref, existing.body if existing else None, result.body)
        if dry_run:
            return self._dry_run_answer(result, existing)
        if existing is not None and existing.body == result.body:
            existing.owners = result.owners
            return with_managed_fields(existing)
        answer = self._store(key, result, existing)
        self._finish_deletion(key)
        return answer

    def patch(self, ref: ObjectRef, merge_patch: Mapping[str, Any]) -> Body:
        """See :meth:`reconciler.cluster.api.Cluster.patch`."""
        self._enter("patch", ref)
        self._served(ref.api_version, ref.kind)
        key = self._key(ref)
        existing = self._objects.get(key)
        if existing is None:
            raise NotFoundError(f"{ref.subject} not found")
        expected = (merge_patch.get("metadata") or {}).get("resourceVersion")
        if expected is not None and expected != existing.body["metadata"].get("resourceVersion"):
            raise ConflictError(f"{ref.subject}: the object has been modified")
        result = patched(existing, merge_patch)
        check_finalizers(ref, existing.body, result.body)
        if result.body != existing.body or result.owners != existing.owners:
            self._store(key, result, existing)
            self._finish_deletion(key)
        stored = self._objects.get(key)
        found = with_managed_fields(stored) if stored else copied(result.body)
        return at_version(found, ref.api_version)

    def create(self, body: Mapping[str, Any], *, field_manager: str) -> Body:
        """A create (POST), as ``kubectl apply`` client-side makes one: the manager owns what it
        set by an ``Update``, not an ``Apply`` (for tests: the product only applies)."""
        ref = ObjectRef.of(body)
        self._enter("create", ref)
        info = self._served(ref.api_version, ref.kind)
        config = config_of(body, info)
        self._namespace_exists(info, ref)
        key = self._key(ObjectRef.of(config))
        if key in self._objects:
            raise ConflictError(f"{ref.subject} already exists")
        drop_empty_metadata(config["metadata"])
        owners = {field_manager: leaf_paths(config) - IDENTITY}
        return self._store(key, Stored(config, owners, {field_manager}), None)

    def delete(self, ref: ObjectRef, *, propagation: str = "Background") -> bool:
        """See :meth:`reconciler.cluster.api.Cluster.delete`."""
        self._enter("delete", ref)
        self._served(ref.api_version, ref.kind)
        key = self._key(ref)
        if key not in self._objects:
            return False
        self._delete_key(key)
        return True

    def kind_info(self, api_version: str, kind: str) -> KindInfo | None:
        """See :meth:`reconciler.cluster.api.Cluster.kind_info`: a kind at one of the versions
        it is served at (a CRD's served versions), none at another."""
        group, _, version = api_version.rpartition("/")
        info = self._kinds.get((group, kind))
        if info is None or version not in self._versions.get((group, kind), ()):
            return None
        return info if info.version == version else replace(info, version=version)

    def served_kinds(self, *, fresh: bool = False) -> list[KindInfo]:
        """See :meth:`reconciler.cluster.api.Cluster.served_kinds` (always as it is now)."""
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
        self.events[name] = counted_event(self.events.get(name), body)

    def set_status(self, ref: ObjectRef, status: Mapping[str, Any]) -> None:
        """Replace an object's status, as its controller would (not counted as our write)."""
        stored = self._objects[self._key(ref)]
        stored.body["status"] = copied(dict(status))
        self._bump(stored.body)
        self._note(WatchEventType.MODIFIED, stored)

    def establish(self, ref: ObjectRef) -> None:
        """Establish a CRD and serve its kind, as the apiextensions controllers do (for tests
        with ``auto_establish`` off)."""
        stored = self._objects[self._key(ref)]
        version = storage_version(stored.body)
        assert version is not None, f"{ref.subject} has no version"
        self._serve(established(stored.body, version), served_versions(stored.body))
        self._bump(stored.body)
        self._note(WatchEventType.MODIFIED, stored)

    def objects(self) -> list[Body]:
        """Every object, sorted by group, kind, namespace and name."""
        return [copied(s.body) for _, s in sorted(self._objects.items())]

    def snapshot(self) -> list[Body]:
        """Every object with its field owners in ``metadata.managedFields``."""
        return [with_managed_fields(s) for _, s in sorted(self._objects.items())]

    def snapshot_parts(self, dump: Callable[[Body], str]) -> list[str]:
        """:meth:`snapshot` as texts, each object's made by ``dump`` and kept until the object
        changes (a new stored object or resource version): a snapshot saved after every write
        costs the objects that write changed, not the whole cluster again."""
        return self._texts.parts(sorted(self._objects.items()), dump)

    def load(self, objects: Sequence[Mapping[str, Any]], *, owned: bool = False) -> None:
        """Add objects from a snapshot: CRDs and Namespaces first, as an API server needs.
        ``owned``: the bodies are the cluster's to keep (just parsed), not copied."""
        for body in sorted(objects, key=load_order):
            self._load_one(dict(body) if owned else copied(dict(body)))

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
        info = self._kinds.get((ref.group, ref.kind))
        namespace = ref.namespace if info is None or info.namespaced else ""
        return ref.group, ref.kind, namespace, ref.name

    @staticmethod
    def _at(stored: Stored | None, api_version: str) -> Stored | None:
        """``stored`` as written at ``api_version`` (another served version of its kind)."""
        if stored is None or stored.body.get("apiVersion") == api_version:
            return stored
        return Stored(at_version(stored.body, api_version), stored.owners)

    def _namespace_exists(self, info: KindInfo, ref: ObjectRef) -> None:
        if not info.namespaced:
            return
        if not ref.namespace:
            raise InvalidObjectError(f"{ref.subject}: a namespace is required")
        if ("", "Namespace", "", ref.namespace) not in self._objects:
            raise NotFoundError(f'namespaces "{ref.namespace}" not found')

    def _store(self, key: tuple[str, str, str, str], new: Stored, old: Stored | None) -> Body:
        """Store ``new`` and answer as a server does: the object as written, before any
        controller (CRD establishing, workload status) reacted to it."""
        body = new.body
        self._stamp(body, old, self._new_uid() if old is None else "")
        self._bump(body)
        self._objects[key] = new
        self.writes += 1
        answer = with_managed_fields(new)
        self._react(key, body)
        self._note(WatchEventType.ADDED if old is None else WatchEventType.MODIFIED, new)
        if old is None and body["kind"] == "Namespace":
            self._namespace_defaults(body["metadata"]["name"])
        return answer

    def _new_uid(self) -> str:
        self._uids += 1
        return f"00000000-0000-4000-8000-{self._uids:012d}"

    def _stamp(self, body: Body, old: Stored | None, uid: str) -> None:
        stamp(body, None if old is None else old.body, uid, self._now())

    def _dry_run_answer(self, result: Stored, existing: Stored | None) -> Body:
        """A dry-run apply's answer: the object as the server would store it (a new one with a
        uid of its own, never used again, and its creation time), without a resource version
        (a new one) or with the stored one (a change): nothing is stored."""
        self._dry_runs += 1
        self._stamp(result.body, existing, f"00000000-0000-4000-9000-{self._dry_runs:012d}")
        return with_managed_fields(result)

    def _namespace_defaults(self, namespace: str) -> None:
        """What kube-controller-manager creates in every new Namespace (asynchronously on a
        server, at once here): the ``default`` ServiceAccount and the ``kube-root-ca.crt``
        ConfigMap. Neither is counted as a write of ours."""
        for generated in namespace_generated(namespace):
            ref = ObjectRef.of(generated)
            key = self._key(ref)
            if key in self._objects:
                continue
            self._stamp(generated, None, self._new_uid())
            self._bump(generated)
            self._objects[key] = Stored(
                generated, {CONTROLLER: leaf_paths(controller_owned(generated))}
            )
            self._note(WatchEventType.ADDED, self._objects[key])

    def _react(self, key: tuple[str, str, str, str], body: Body) -> None:
        """What controllers would do: serve a new CRD's kind, run a workload."""
        if body["kind"] == "CustomResourceDefinition":
            self._serve_crd(body)
        elif body["kind"] in WORKLOADS and self.auto_ready:
            body["status"] = available_status(body)

    def _serve_crd(self, crd: Body) -> None:
        """The apiextensions controllers, when ``auto_establish`` is on."""
        version = storage_version(crd)
        if self.auto_establish and version:
            self._serve(established(crd, version), served_versions(crd))

    def _serve(self, info: KindInfo, versions: tuple[str, ...]) -> None:
        """Serve a CRD's kind at ``versions`` (discovery names the first), or no longer when
        it serves none."""
        key = (info.group, info.kind)
        if not versions:
            self._kinds.pop(key, None)
            self._versions.pop(key, None)
            return
        self._kinds[key] = replace(info, version=versions[0])
        self._versions[key] = versions

    def _delete_key(self, key: Key) -> None:
        """A DELETE as the server carries it out: a CRD's instances and a Namespace's objects
        are deleted first (the apiextensions and namespace controllers); an object with
        finalizers, or with content still held by theirs, is kept Terminating
        (``deletionTimestamp``, grace period 0) until they are gone; the others go at once."""
        stored = self._objects[key]
        metadata = stored.body["metadata"]
        if "deletionTimestamp" in metadata:
            return
        for content in self._contents(stored.body):
            self._delete_key(content)
        if metadata.get("finalizers") or self._contents(stored.body):
            terminating(stored.body, self._now())
            self._bump(stored.body)
            self._note(WatchEventType.MODIFIED, stored)
        else:
            self._remove(key)
        self.writes += 1

    def _contents(self, body: Body) -> list[Key]:
        """What goes before ``body`` is gone: a CRD's instances, a Namespace's objects."""
        if body["kind"] == "CustomResourceDefinition":
            kind = crd_kind(body)
            return [k for k in self._objects if (k[0], k[1]) == kind]
        if body["kind"] == "Namespace":
            return [k for k in self._objects if k[2] == body["metadata"]["name"]]
        return []

    def _remove(self, key: Key) -> None:
        """``key`` is gone; a Terminating CRD or Namespace that waited for it goes when it
        was the last of its content."""
        body = self._gone(key)
        if body["kind"] == "CustomResourceDefinition":
            self._kinds.pop(crd_kind(body), None)
            self._versions.pop(crd_kind(body), None)
        for parent in self._parents(key):
            self._finish_deletion(parent)

    def _parents(self, key: Key) -> list[Key]:
        """The CRD of ``key``'s kind and ``key``'s Namespace, where they are stored."""
        crds = [
            k
            for k, s in self._objects.items()
            if k[1] == "CustomResourceDefinition" and crd_kind(s.body) == (key[0], key[1])
        ]
        namespace = ("", "Namespace", "", key[2])
        return crds + ([namespace] if key[2] and namespace in self._objects else [])

    def _gone(self, key: Key) -> Body:
        """``key`` deleted: its last state is the watches' DELETED event."""
        stored = self._objects.pop(key)
        self._bump(stored.body)
        self._note(WatchEventType.DELETED, stored)
        return stored.body

    def _finish_deletion(self, key: Key) -> None:
        """A Terminating object goes once its finalizers and its content are gone."""
        stored = self._objects.get(key)
        if stored is None:
            return
        metadata = stored.body["metadata"]
        if "deletionTimestamp" not in metadata or metadata.get("finalizers"):
            return
        if not self._contents(stored.body):
            self._remove(key)
            self.writes += 1

    def _bump(self, body: Body) -> None:
        self._resource_version += 1
        body["metadata"]["resourceVersion"] = str(self._resource_version)

    def _now(self) -> str:
        return self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")

    def _load_one(self, data: dict[str, Any]) -> None:
        metadata = data["metadata"] = data.get("metadata") or {}
        owners, updaters = owners_of(metadata.pop("managedFields", None) or [])
        ref = ObjectRef.of(data)
        info = self._served(ref.api_version, ref.kind)
        if not info.namespaced:
            metadata.pop("namespace", None)
        self._resource_version += 1
        metadata.setdefault("resourceVersion", str(self._resource_version))
        metadata.setdefault("generation", 1)
        self._uids += 1
        metadata.setdefault("uid", f"00000000-0000-4000-8000-{self._uids:012d}")
        self._objects[self._key(ObjectRef.of(data))] = Stored(data, owners, updaters)
        if data["kind"] == "CustomResourceDefinition":
            self._serve_crd(data)
