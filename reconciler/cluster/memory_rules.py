"""What the in-memory API server checks and does as a real one does (pure).

Names validated as the server validates them (422), values of the wrong type refused as the
server refuses them (500), a workload's required selector, what an apply may set (no status, no
server-owned metadata), the status a new object starts with, the fields a server stamps on a new
or changed object, a CRD Established and the kind it serves, a workload made available, and the
objects kube-controller-manager creates in a new Namespace. Used by
:mod:`reconciler.cluster.memory`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reconciler.cluster.api import KindInfo
from reconciler.cluster.memory_fields import copied, spec_of
from reconciler.core.objects import Body, ObjectRef, crd_kind
from reconciler.core.serverform import server_form
from reconciler.errors import ImmutableFieldError, InvalidObjectError, ServerError

_SERVER_FIELDS = (
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)
WORKLOADS = ("Deployment", "StatefulSet")


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


def check_name(ref: ObjectRef) -> None:
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


def check_typed(ref: ObjectRef, config: Mapping[str, Any]) -> None:
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


def check_selector(ref: ObjectRef, body: Mapping[str, Any]) -> None:
    """A workload as it would be stored needs ``spec.selector``, as the server says (422)."""
    if (ref.group, ref.kind) in _SELECTED and not (body.get("spec") or {}).get("selector"):
        raise InvalidObjectError(
            f'{ref.kind}.{ref.group} "{ref.name}" is invalid: spec.selector: Required value'
        )


#: Fields a server never changes once an object of the kind exists (422 ``field is
#: immutable``), as a Kubernetes 1.36 server refuses them.
_IMMUTABLE: dict[tuple[str, str], tuple[tuple[str, ...], ...]] = {
    ("batch", "Job"): (("spec", "template"), ("spec", "selector")),
}


def check_immutable(ref: ObjectRef, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """A change of a field the server never changes is Invalid, as the server says it: the
    value dumped whole, then ``field is immutable``."""
    for path in _IMMUTABLE.get((ref.group, ref.kind), ()):
        before, after = _at(old, path), _at(new, path)
        if before != after:
            where = ".".join(path)
            raise ImmutableFieldError(
                f'{ref.kind}.{ref.group} "{ref.name}" is invalid: {where}: '
                f"Invalid value: {after!r}: field is immutable"
            )


def _at(body: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    found: Any = body
    for key in path:
        found = found.get(key) if isinstance(found, Mapping) else None
    return found


CONTROLLER = "kube-controller-manager"
_ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)


def namespace_generated(namespace: str) -> list[Body]:
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


def controller_owned(body: Mapping[str, Any]) -> Body:
    """The fields a controller set on an object it created (its metadata's name and namespace
    are the object's identity, owned by nobody)."""
    owned = {k: copied(v) for k, v in body.items() if k not in ("apiVersion", "kind", "metadata")}
    annotations = (body.get("metadata") or {}).get("annotations")
    if annotations:
        owned["metadata"] = {"annotations": copied(annotations)}
    return owned


def config_of(body: Mapping[str, Any], info: KindInfo, *, as_written: bool = False) -> Body:
    """What an apply sets: the body without status and server-owned metadata, in the server's
    words (quantities, port protocols, a Secret's ``stringData`` in ``data``) unless
    ``as_written``."""
    config = copied(dict(body)) if as_written else server_form(copied(dict(body)))
    config.pop("status", None)
    metadata = config.setdefault("metadata", {})
    for name in _SERVER_FIELDS:
        metadata.pop(name, None)
    if not info.namespaced:
        metadata.pop("namespace", None)
    return config


def storage_version(crd: Mapping[str, Any]) -> str | None:
    versions = (crd.get("spec") or {}).get("versions") or []
    version = next((v.get("name") for v in versions if v.get("storage")), None)
    if version is None and versions:
        version = versions[0].get("name")
    return str(version) if version else None


def served_versions(crd: Mapping[str, Any]) -> tuple[str, ...]:
    """The versions a CRD serves, the one discovery prefers first (Kubernetes' version priority:
    ``v2`` before ``v1`` before ``v1beta2`` before ``v1beta1`` before ``v1alpha1``)."""
    versions = (crd.get("spec") or {}).get("versions") or []
    served = [str(v["name"]) for v in versions if v.get("served") and v.get("name")]
    return tuple(sorted(served, key=version_priority))


_KUBE_VERSION = re.compile(r"v(\d+)(?:(alpha|beta)(\d+))?")
_STABILITY = {None: 0, "beta": 1, "alpha": 2}


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key of a Kubernetes API version, the highest priority first: GA before beta before
    alpha, a higher number first; a version of another shape after all, by name."""
    match = _KUBE_VERSION.fullmatch(version)
    if match is None:
        return 3, 0, 0, version
    major, stability, minor = match.groups()
    return _STABILITY[stability], -int(major), -int(minor or 0), version


def at_version(body: Body, api_version: str) -> Body:
    """``body`` read at another served version of its kind: the same object, its ``apiVersion``
    that one, its fields converted as the server converts them (a custom resource: the ``None``
    conversion, the same fields; a HorizontalPodAutoscaler: ``autoscaling/v1``'s CPU target is
    ``autoscaling/v2``'s CPU utilization metric); ``body`` is left as it is."""
    if body.get("apiVersion") == api_version:
        return body
    converted = {**body, "apiVersion": api_version}
    if body.get("kind") == "HorizontalPodAutoscaler" and isinstance(body.get("spec"), Mapping):
        converted["spec"] = _autoscaler_spec(body["spec"], api_version)
    return converted


#: The CPU utilization metric of an ``autoscaling/v2`` HorizontalPodAutoscaler.
_CPU = ("Resource", "cpu", "Utilization")


def _autoscaler_spec(spec: Mapping[str, Any], api_version: str) -> Body:
    """An HPA's spec at ``autoscaling/v1`` or ``autoscaling/v2`` (the CPU target only, as far
    as the tests need: other metrics are not kept at v1)."""
    converted = copied(dict(spec))
    if api_version == "autoscaling/v1":
        target = next(
            (
                m["resource"]["target"].get("averageUtilization")
                for m in converted.pop("metrics", None) or []
                if (m.get("type"), (m.get("resource") or {}).get("name"),
                    ((m.get("resource") or {}).get("target") or {}).get("type")) == _CPU
            ),
            None,
        )  # fmt: skip
        converted.pop("behavior", None)
        if target is not None:
            converted["targetCPUUtilizationPercentage"] = target
        return converted
    percent = converted.pop("targetCPUUtilizationPercentage", None)
    if percent is not None:
        target = {"type": "Utilization", "averageUtilization": percent}
        resource = {"name": "cpu", "target": target}
        converted["metrics"] = [{"type": "Resource", "resource": resource}]
    return converted


def initial_status(body: Body) -> None:
    """The status a real API server gives an object it creates (before any controller ran)."""
    if body["kind"] == "CustomResourceDefinition":
        # apiextensions: conditions is not omitempty, so a new CRD answers ``null`` there
        version = storage_version(body)
        body["status"] = {
            "conditions": None,
            "acceptedNames": {"plural": "", "kind": ""},
            "storedVersions": [version] if version else None,
        }
    elif body["kind"] in WORKLOADS:
        body["status"] = {}


def labels_match(body: Mapping[str, Any], wanted: Mapping[str, str]) -> bool:
    labels = (body.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in wanted.items())


def established(crd: Body, version: str) -> KindInfo:
    """Names accepted, Established (set on ``crd``), and the kind it serves in its storage
    version, as the apiextensions controllers do."""
    group, kind = crd_kind(crd)
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    stored = list((crd.get("status") or {}).get("storedVersions") or [])
    crd["status"] = {
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts"},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"},
        ],
        "acceptedNames": copied(names),
        "storedVersions": stored if version in stored else [*stored, version],
    }
    plural = str(names.get("plural") or kind.lower() + "s")
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    return KindInfo(group, version, kind, plural, namespaced)


def stamp(body: Body, old: Body | None, uid: str, now: str) -> None:
    """What the server sets on an object it is about to store: a new one gets ``uid``, its
    creation time, generation 1 and its initial status; a changed one keeps the old
    metadata, with the generation bumped by a change of its spec."""
    metadata = body["metadata"]
    if old is None:
        metadata["uid"] = uid
        metadata["creationTimestamp"] = now
        metadata["generation"] = 1
        initial_status(body)
        return
    for name in _KEPT_FIELDS:
        if name in old["metadata"]:
            metadata[name] = old["metadata"][name]
    if spec_of(body) != spec_of(old):
        metadata["generation"] = int(metadata.get("generation", 1)) + 1


#: What a changed object keeps of the stored one's metadata.
_KEPT_FIELDS = (
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


def terminating(body: Body, now: str) -> None:
    """Mark ``body`` as being deleted, as the server does when finalizers (or content) hold
    it: ``deletionTimestamp`` now, ``deletionGracePeriodSeconds`` 0."""
    body["metadata"]["deletionTimestamp"] = now
    body["metadata"]["deletionGracePeriodSeconds"] = 0


def check_finalizers(ref: ObjectRef, old: Body | None, new: Body) -> None:
    """No finalizer may be added to an object being deleted (422, as the server refuses it)."""
    if old is None or "deletionTimestamp" not in old["metadata"]:
        return
    before = set(old["metadata"].get("finalizers") or ())
    added = sorted(set(new["metadata"].get("finalizers") or ()) - before)
    if added:
        raise InvalidObjectError(
            f"{ref.subject} is invalid: metadata.finalizers: Forbidden: no new finalizers can "
            f"be added if the object is being deleted, found new finalizers {added}"
        )


def available_status(body: Mapping[str, Any]) -> Body:
    """The status of a workload whose replicas all run (what a kubelet and the workload's
    controller would report)."""
    wanted = (body.get("spec") or {}).get("replicas")
    replicas = 1 if wanted is None else int(wanted)
    return {
        "observedGeneration": body["metadata"]["generation"],
        "replicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
        "updatedReplicas": replicas,
    }


def counted_event(previous: Body | None, body: Body) -> Body:
    """An Event as stored when it is recorded again: one object whose count grows, as
    client-go aggregates repeats."""
    if previous is None:
        return body
    return previous | {"count": int(previous["count"]) + 1, "lastTimestamp": body["lastTimestamp"]}


def load_order(body: Mapping[str, Any]) -> tuple[bool, bool]:
    """Sort key of objects loaded into a server: CRDs first, then Namespaces, then the rest."""
    return body.get("kind") != "CustomResourceDefinition", body.get("kind") != "Namespace"
