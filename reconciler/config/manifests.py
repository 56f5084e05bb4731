"""The structure Kubernetes requires of the objects in module manifests (pure).

Our schemas cover our own files; a module's ``manifest.yaml`` and ``default.yaml`` hold
Kubernetes objects, which the API server checks only when a sync applies them, and which our
own code reads before that (rendering, planning, readiness). :func:`object_problems` refuses at
``validate`` time what the API server would refuse, or what would make every reconcile fail:

- the document is a mapping with string ``apiVersion`` (``[group/]version``) and ``kind``;
- ``metadata`` is a mapping with a ``name`` valid for the kind (a DNS-1123 subdomain; a DNS-1123
  label for a Namespace, a DNS-1035 label for a Service, a path segment for RBAC objects;
  ``<plural>.<group>`` for a CustomResourceDefinition), an optional ``namespace`` that is a
  DNS-1123 label, and ``labels`` and ``annotations`` that are maps of string to string with
  keys and label values by Kubernetes' rules (annotations at most 256 KiB in all);
- ``reconciler.dev/recreate`` is ``on-immutable``, and never on a CustomResourceDefinition, a
  Namespace or a PersistentVolumeClaim (their deletion takes data along);
- a CustomResourceDefinition (``apiextensions.k8s.io/v1``) has ``spec.group``,
  ``spec.names.kind``, ``spec.names.plural``, ``spec.scope`` (Namespaced or Cluster) and a
  non-empty ``spec.versions`` of mappings with ``name``, ``served`` and ``storage``, exactly one
  of them the storage version;
- a ConfigMap's ``data`` maps keys to strings and its ``binaryData`` to base64 strings (a map
  or list there passed, then failed every apply; a Secret's are refused whole, C6);
- workloads: ``spec`` and the pod template are mappings, ``spec.replicas`` and the other count
  fields are integers >= 0, and containers are lists of mappings with a string ``name`` (a
  DNS-1123 label) and ``image``.

:func:`operator_version_problems` checks the operator's ``app.kubernetes.io/version`` label, from
which the planner reads the running version (C4).

Every structure problem is a C1 diagnostic located at the field, with its JSON pointer. Messages
name the field and the rule, never the value that failed (it may be a pasted secret); a mapping
key that fails is located by its line, and the pointer stops at its parent. Caller: the
validator.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Generator, Iterator, Mapping
from typing import Any

from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic, Pointer, format_pointer
from reconciler.core.preflight import NEVER_RECREATED, RECREATE_ANNOTATION, RECREATE_ON_IMMUTABLE
from reconciler.core.versions import parse_running_version

RULE = "C1"

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(rf"^{_LABEL}$")
DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_API_VERSION = re.compile(rf"^({_LABEL}(\.{_LABEL})*/)?[a-z]([-a-z0-9]*[a-z0-9])?$")
_KIND = re.compile(r"^[A-Za-z]([-A-Za-z0-9]*[A-Za-z0-9])?$")
LABEL_MAX = 63
SUBDOMAIN_MAX = 253
ANNOTATIONS_MAX_BYTES = 256 * 1024

CRD_API_VERSION = "apiextensions.k8s.io/v1"
CRD_SCOPES = ("Namespaced", "Cluster")
_RBAC_KINDS = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})
#: Where each workload kind keeps its pod spec.
POD_SPEC_PATHS: Mapping[str, Pointer] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
#: Integer fields (>= 0) of each workload kind's ``spec``.
COUNT_FIELDS: Mapping[str, tuple[str, ...]] = {
    "Deployment": (
        "replicas",
        "minReadySeconds",
        "revisionHistoryLimit",
        "progressDeadlineSeconds",
    ),
    "StatefulSet": ("replicas", "minReadySeconds", "revisionHistoryLimit"),
    "ReplicaSet": ("replicas", "minReadySeconds"),
    "ReplicationController": ("replicas", "minReadySeconds"),
    "DaemonSet": ("minReadySeconds", "revisionHistoryLimit"),
    "Job": ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds"),
}
_CONTAINER_LISTS = ("initContainers", "containers")
#: Maps of key to string of each kind: (field, whether the strings are base64). A Secret's
#: ``data`` and ``stringData`` are refused whole (C6: no credentials in the repo).
DATA_FIELDS: Mapping[str, tuple[tuple[str, bool], ...]] = {
    "ConfigMap": (("data", False), ("binaryData", True)),
}
_DATA_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def object_problems(document: Document) -> Iterator[Diagnostic]:
    """Every way ``document`` is not a Kubernetes object the API server would accept (C1)."""
    data = document.data
    if not isinstance(data, Mapping):
        yield document.diagnostic(RULE, "a manifest document must be a Kubernetes object", ())
        return
    at = _Located(document)
    kind = yield from _type_problems(at, data)
    yield from _metadata_problems(at, data.get("metadata"), kind)
    yield from _recreate_problems(at, data.get("metadata"), kind)
    if kind == "CustomResourceDefinition":
        yield from _crd_problems(at, data)
    elif kind in POD_SPEC_PATHS:
        yield from _workload_problems(at, data, kind)
    for field, base64 in DATA_FIELDS.get(kind, ()):
        yield from _data_problems(at, data, kind, field, base64=base64)


class _Located:
    """Makes diagnostics in one document; ``key`` locates a mapping key instead of its value
    and shows only its parent's pointer (the key failed a check: it is not echoed)."""

    def __init__(self, document: Document) -> None:
        self.document = document

    def __call__(self, message: str, pointer: Pointer, *, key: bool = False) -> Diagnostic:
        if not key:
            return self.document.diagnostic(RULE, message, pointer)
        place = self.document.position(pointer, key=True)
        shown = format_pointer(pointer[:-1])
        return Diagnostic(self.document.path, place.line, place.column, RULE, message, shown)


def _type_problems(at: _Located, data: Mapping[str, Any]) -> Generator[Diagnostic, None, str]:
    """``apiVersion`` and ``kind``; returns the kind when it is a valid one."""
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if not isinstance(api_version, str) or not api_version:
        yield at("Kubernetes object has no 'apiVersion' (a string)", ())
    elif not _API_VERSION.match(api_version):
        message = "apiVersion must be '<version>' or '<group>/<version>' (e.g. apps/v1)"
        yield at(message, ("apiVersion",))
    if not isinstance(kind, str) or not kind:
        yield at("Kubernetes object has no 'kind' (a string)", ())
        return ""
    if len(kind) > LABEL_MAX or not _KIND.match(kind):
        yield at("kind must be a name of letters and digits (e.g. ConfigMap)", ("kind",))
        return ""
    return kind


# -- ConfigMap and Secret data -------------------------------------------------------------------


def _data_problems(
    at: _Located, data: Mapping[str, Any], kind: str, field: str, *, base64: bool
) -> Iterator[Diagnostic]:
    """``data`` and ``binaryData`` of a ConfigMap: maps of keys (letters, digits, ``-``,
    ``_``, ``.``) to strings, base64 ones for ``binaryData``."""
    values = data.get(field)
    if values is None:
        return
    if not isinstance(values, Mapping):
        yield at(f"{kind} {field} must be a map of keys to strings", (field,))
        return
    what = "base64 strings" if base64 else "strings (quote numbers; a map or list as a text block)"
    for key, value in values.items():
        if not isinstance(key, str) or len(key) > SUBDOMAIN_MAX or not _DATA_KEY.match(key):
            message = f"a {kind} {field} key is not valid: letters, digits, '-', '_' or '.'"
            yield at(message, (field, str(key)), key=True)
        elif not isinstance(value, str) or (base64 and not _is_base64(value)):
            yield at(f"{kind} {field} values must be {what}", (field, key))


def _is_base64(text: str) -> bool:
    try:
        binascii.a2b_base64(text.replace("\n", "").replace("\r", ""), strict_mode=True)
    except binascii.Error:
        return False
    return True


# -- metadata ------------------------------------------------------------------------------------


def _metadata_problems(at: _Located, metadata: Any, kind: str) -> Iterator[Diagnostic]:
    if not isinstance(metadata, Mapping):
        yield at("Kubernetes object needs metadata (a mapping) with a name", ("metadata",))
        return
    name = metadata.get("name")
    rule = _name_rule(kind)
    if not isinstance(name, str) or not rule.accepts(name):
        yield at(f"Kubernetes object needs metadata.name ({rule.text})", ("metadata", "name"))
    namespace = metadata.get("namespace")
    if namespace is not None and not _is_label(namespace):
        message = f"metadata.namespace must be {_LABEL_TEXT}"
        yield at(message, ("metadata", "namespace"))
    yield from _string_map(at, metadata, "labels", label_values=True)
    yield from _string_map(at, metadata, "annotations", label_values=False)


def _recreate_problems(at: _Located, metadata: Any, kind: str) -> Iterator[Diagnostic]:
    """The opt-in recreate: its one value, and never on a kind whose deletion takes data along."""
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping) or RECREATE_ANNOTATION not in annotations:
        return
    pointer = ("metadata", "annotations", RECREATE_ANNOTATION)
    if annotations[RECREATE_ANNOTATION] != RECREATE_ON_IMMUTABLE:
        yield at(f"{RECREATE_ANNOTATION} must be {RECREATE_ON_IMMUTABLE}", pointer)
    elif kind in NEVER_RECREATED:
        message = (
            f"a {kind} is never recreated (deleting it takes what it holds along): drop "
            f"{RECREATE_ANNOTATION}"
        )
        yield at(message, pointer)


class _NameRule:
    def __init__(self, text: str, pattern: re.Pattern[str] | None, limit: int) -> None:
        self.text = text
        self.pattern = pattern
        self.limit = limit

    def accepts(self, name: str) -> bool:
        if not name or len(name) > self.limit:
            return False
        if self.pattern is None:  # a path segment
            return name not in (".", "..") and not any(c in name for c in "/%")
        return bool(self.pattern.match(name))


_LABEL_TEXT = (
    "a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter "
    "or digit, at most 63 characters"
)
_SUBDOMAIN = _NameRule(
    "a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', starting and ending with a "
    "letter or digit, at most 253 characters",
    DNS1123_SUBDOMAIN,
    SUBDOMAIN_MAX,
)
_NAME_RULES = {
    "Namespace": _NameRule(_LABEL_TEXT, DNS1123_LABEL, LABEL_MAX),
    "Service": _NameRule(
        "a DNS-1035 label: lower-case letters, digits and '-', starting with a letter, ending "
        "with a letter or digit, at most 63 characters",
        DNS1035_LABEL,
        LABEL_MAX,
    ),
    **{
        kind: _NameRule("a name without '/' or '%', not '.' or '..'", None, SUBDOMAIN_MAX)
        for kind in _RBAC_KINDS
    },
}


def _name_rule(kind: str) -> _NameRule:
    return _NAME_RULES.get(kind, _SUBDOMAIN)


def _is_label(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= LABEL_MAX and bool(DNS1123_LABEL.match(value))


def _string_map(
    at: _Located, metadata: Mapping[str, Any], field: str, *, label_values: bool
) -> Iterator[Diagnostic]:
    values = metadata.get(field)
    if values is None:
        return
    pointer: Pointer = ("metadata", field)
    if not isinstance(values, Mapping):
        yield at(f"metadata.{field} must be a map of string keys to string values", pointer)
        return
    what = "label" if label_values else "annotation"
    size = 0
    for key, value in values.items():
        if not isinstance(key, str) or not qualified_key_ok(key):
            yield at(f"a {what} key is not valid: {_KEY_TEXT}", (*pointer, str(key)), key=True)
            continue
        if not isinstance(value, str):
            message = f"{what} values must be strings (quote numbers and booleans)"
            yield at(message, (*pointer, key))
        elif label_values and not label_value_ok(value):
            yield at(f"label value is not valid: {_VALUE_TEXT}", (*pointer, key))
        else:
            size += len(key.encode()) + len(value.encode())
    if not label_values and size > ANNOTATIONS_MAX_BYTES:
        yield at("metadata.annotations are over 256 KiB in all (the API server's limit)", pointer)


_KEY_TEXT = (
    "an optional DNS-1123 subdomain prefix and '/', then a name of at most 63 letters, digits, "
    "'-', '_' or '.', starting and ending with a letter or digit"
)
_VALUE_TEXT = (
    "at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit "
    "(or empty)"
)


def qualified_key_ok(key: str) -> bool:
    """A label or annotation key: ``[prefix/]name`` by Kubernetes' rules."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > SUBDOMAIN_MAX or not DNS1123_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= LABEL_MAX and bool(_QUALIFIED_NAME.match(name))


def label_value_ok(value: str) -> bool:
    """A label value: empty, or at most 63 characters of the allowed set."""
    return value == "" or (len(value) <= LABEL_MAX and bool(_QUALIFIED_NAME.match(value)))


# -- CustomResourceDefinitions -------------------------------------------------------------------


def _crd_problems(at: _Located, data: Mapping[str, Any]) -> Iterator[Diagnostic]:
    if data.get("apiVersion") != CRD_API_VERSION:
        message = (
            f"a CustomResourceDefinition must use apiVersion {CRD_API_VERSION} "
            "(v1beta1 is not served since Kubernetes 1.22)"
        )
        yield at(message, ("apiVersion",))
        return
    spec = data.get("spec")
    if not isinstance(spec, Mapping):
        yield at("a CustomResourceDefinition needs spec (a mapping)", ("spec",))
        return
    group, plural = spec.get("group"), None
    if not isinstance(group, str) or not DNS1123_SUBDOMAIN.match(group) or "." not in group:
        message = "spec.group must be a DNS-1123 subdomain with a '.' (e.g. example.io)"
        yield at(message, ("spec", "group"))
        group = None
    names = spec.get("names")
    if not isinstance(names, Mapping):
        yield at("a CustomResourceDefinition needs spec.names (a mapping)", ("spec", "names"))
    else:
        plural = yield from _crd_names(at, names)
    if spec.get("scope") not in CRD_SCOPES:
        yield at("spec.scope must be Namespaced or Cluster", ("spec", "scope"))
    yield from _crd_versions(at, spec.get("versions"))
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if group and plural and isinstance(name, str) and name != f"{plural}.{group}":
        message = (
            "metadata.name of a CustomResourceDefinition must be <spec.names.plural>.<spec.group>"
        )
        yield at(message, ("metadata", "name"))


def _crd_names(at: _Located, names: Mapping[str, Any]) -> Generator[Diagnostic, None, str | None]:
    """``names.kind`` and ``names.plural``; returns the plural when it is valid."""
    kind, plural = names.get("kind"), names.get("plural")
    if not isinstance(kind, str) or not _KIND.match(kind) or len(kind) > LABEL_MAX:
        message = "spec.names.kind must be a name of letters and digits (e.g. Widget)"
        yield at(message, ("spec", "names", "kind"))
    if not isinstance(plural, str) or not DNS1035_LABEL.match(plural) or len(plural) > LABEL_MAX:
        message = "spec.names.plural must be a lower-case DNS-1035 label (e.g. widgets)"
        yield at(message, ("spec", "names", "plural"))
        return None
    return plural


def _crd_versions(at: _Located, versions: Any) -> Iterator[Diagnostic]:
    pointer: Pointer = ("spec", "versions")
    if not isinstance(versions, list) or not versions:
        yield at("spec.versions must be a non-empty list", pointer)
        return
    storage = 0
    for index, version in enumerate(versions):
        if not isinstance(version, Mapping):
            yield at("each of spec.versions must be a mapping", (*pointer, index))
            continue
        name = version.get("name")
        if not isinstance(name, str) or not DNS1035_LABEL.match(name) or len(name) > LABEL_MAX:
            message = "a version's name must be a DNS-1035 label (e.g. v1alpha1)"
            yield at(message, (*pointer, index, "name"))
        for flag in ("served", "storage"):
            if not isinstance(version.get(flag), bool):
                yield at(f"a version needs '{flag}' (true or false)", (*pointer, index, flag))
        storage += version.get("storage") is True
    if storage != 1:
        yield at(f"exactly one of spec.versions must have storage: true, found {storage}", pointer)


# -- workloads -----------------------------------------------------------------------------------


def _workload_problems(at: _Located, data: Mapping[str, Any], kind: str) -> Iterator[Diagnostic]:
    spec = data.get("spec")
    if spec is None:
        return
    if not isinstance(spec, Mapping):
        yield at(f"spec of a {kind} must be a mapping", ("spec",))
        return
    for name in COUNT_FIELDS.get(kind, ()):
        value = spec.get(name)
        if value is not None and (type(value) is not int or value < 0):
            yield at(f"spec.{name} must be an integer >= 0", ("spec", name))
    yield from _pod_spec_problems(at, data, POD_SPEC_PATHS[kind])


def _pod_spec_problems(
    at: _Located, data: Mapping[str, Any], path: Pointer
) -> Iterator[Diagnostic]:
    """Every mapping on the way to the pod spec, then its containers; an absent part is left
    to the API server's own messages (our fixtures and tests use short workloads)."""
    node: Any = data
    for depth in range(1, len(path) + 1):
        node = node.get(path[depth - 1])
        if node is None:
            return
        if not isinstance(node, Mapping):
            yield at(f"{'.'.join(map(str, path[:depth]))} must be a mapping", path[:depth])
            return
    for field in _CONTAINER_LISTS:
        yield from _containers(at, node.get(field), (*path, field))


def _containers(at: _Located, containers: Any, pointer: Pointer) -> Iterator[Diagnostic]:
    if containers is None:
        return
    dotted = ".".join(map(str, pointer))
    if not isinstance(containers, list):
        yield at(f"{dotted} must be a list of containers", pointer)
        return
    for index, container in enumerate(containers):
        if not isinstance(container, Mapping):
            yield at(f"each of {dotted} must be a mapping", (*pointer, index))
            continue
        if not _is_label(container.get("name")):
            yield at(f"a container needs a name ({_LABEL_TEXT})", (*pointer, index, "name"))
        image = container.get("image")
        if not isinstance(image, str) or not image.strip():
            yield at("a container needs an image (a string)", (*pointer, index, "image"))


# -- the operator's version label ----------------------------------------------------------------


def operator_version_problems(document: Document, label: str, version: str) -> Iterator[Diagnostic]:
    """L5 reads the running version from the operator's ``label``: in version ``version``'s
    manifest it must be that version (a leading ``v`` allowed), or every later sync would see
    a version that is not the one installed (held as a downgrade, or an upgrade every time)."""
    labels = document.data.get("metadata", {}).get("labels") or {}
    if label not in labels or not isinstance(labels[label], str):
        return
    running = parse_running_version(labels[label])
    if running is None or running.compare(version) != 0:
        message = (
            f"the operator's {label} label must be the version of its folder, {version} "
            "(the running version is read from it)"
        )
        yield document.diagnostic("C4", message, ("metadata", "labels", label))
