"""One owner per object: no two modules may declare the same Kubernetes object (pure).

Two modules that both ship, say, ``Namespace/shared`` would take it from each other on every
apply (our module label flips), and the removal of either would delete what the other still
uses. Validation (C4) refuses such a repo, naming both places. An object's identity is its API
group, kind, namespace (the module's ``spec.namespace`` when it names none and is namespaced)
and name; versions of one module may of course repeat their own objects. Callers: the validator.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from reconciler.core.diagnostics import Diagnostic
from reconciler.core.model import Module
from reconciler.core.render import CLUSTER_SCOPED_KINDS

if TYPE_CHECKING:
    from reconciler.config.raw import RawModule

Identity = tuple[str, str, str, str]


def shared_objects(
    raw_modules: tuple[RawModule, ...], modules: Mapping[str, Module]
) -> Iterator[Diagnostic]:
    """A C4 diagnostic at every declaration of an object that an earlier module (by name)
    declares too."""
    cluster_kinds = _cluster_scoped_custom_kinds(modules)
    owners: dict[Identity, tuple[str, str]] = {}
    for raw in sorted(raw_modules, key=lambda m: m.name):
        module = modules.get(raw.name)
        if module is None:
            continue
        for version in raw.versions:
            if version.manifest is None:
                continue
            for document in version.manifest.documents:
                if not _checkable(document.data):
                    continue  # malformed objects are reported by the manifest checks
                identity = _identity(document.data, module.namespace, cluster_kinds)
                owner = owners.get(identity)
                if owner is not None and owner[0] != raw.name:
                    yield document.diagnostic(
                        "C4",
                        f"{_shown(identity)} is also declared by module '{owner[0]}' "
                        f"({owner[1]}); two modules may not declare the same object",
                        ("metadata", "name"),
                    )
                owners.setdefault(identity, (raw.name, version.manifest.path))


def _checkable(body: object) -> bool:
    if not isinstance(body, Mapping):
        return False
    metadata = body.get("metadata")
    return isinstance(metadata, Mapping) and isinstance(metadata.get("name"), str)


def _identity(
    body: Mapping[str, Any], namespace: str, cluster_kinds: frozenset[tuple[str, str]]
) -> Identity:
    group = str(body.get("apiVersion", "")).rpartition("/")[0]
    kind = str(body.get("kind", ""))
    metadata = body["metadata"]
    scoped = kind in CLUSTER_SCOPED_KINDS or (group, kind) in cluster_kinds
    where = "" if scoped else str(metadata.get("namespace") or namespace)
    return group, kind, where, str(metadata.get("name", ""))


def _shown(identity: Identity) -> str:
    _, kind, namespace, name = identity
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


def _cluster_scoped_custom_kinds(modules: Mapping[str, Module]) -> frozenset[tuple[str, str]]:
    found = set()
    for module in modules.values():
        for version in module.versions.values():
            for body in version.objects:
                spec = body.get("spec") or {}
                if (
                    body.get("kind") == "CustomResourceDefinition"
                    and spec.get("scope") == "Cluster"
                ):
                    found.add(
                        (str(spec.get("group", "")), str((spec.get("names") or {}).get("kind", "")))
                    )
    return frozenset(found)
