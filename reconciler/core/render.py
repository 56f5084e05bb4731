"""Rendering: the exact objects a runtime should run (pure).

For each resolved module, the objects of its version's manifest and its default configuration,
each with our labels and annotation (DESIGN.md §3), namespaced objects that name no namespace
put in the module's namespace, in a deterministic apply order: modules in dependency order;
inside a module CRDs and Namespaces first, then the other kinds in a fixed order, custom
resources after built-in kinds, the default configuration last; ties by namespace and name.
The module's objects are prepared once per (module, version) and only stamped per runtime.
Callers: the CLI ``render`` command, the lifecycle executor and the operations runner (the
desired objects the planner compares), the fleet diff and review, the ownership check (C4).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.core.model import (
    ANNOTATION_DEFAULT_CONFIGURATION,
    ANNOTATION_MODULE_VERSION,
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    LABEL_RUNTIME,
    MANAGED_BY_VALUE,
    ConfigRepo,
    HookPolicy,
    Module,
)
from reconciler.core.objects import ObjectRef
from reconciler.core.overrides import (
    ConfigOverride,
    apply_override,
    module_channel,
    resolve_override,
)
from reconciler.core.resolve import Resolution, ResolvedModule
from reconciler.errors import RenderError

#: The label that ties a Helm hook object to its module (never ``managed-by``: a hook is no
#: object of the module, so never adopted into an inventory nor pruned; core.hooks).
LABEL_HOOK_OF = "reconciler.dev/hook-of"

#: Apply order of built-in kinds; unknown kinds (custom resources) come after all of them.
KIND_ORDER: tuple[str, ...] = (
    "CustomResourceDefinition",
    "Namespace",
    "ResourceQuota",
    "LimitRange",
    "PriorityClass",
    "ServiceAccount",
    "Secret",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "PodDisruptionBudget",
    "NetworkPolicy",
    "IngressClass",
    "Ingress",
    "APIService",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
)
_RANK = {kind: rank for rank, kind in enumerate(KIND_ORDER)}

#: Built-in kinds that have no namespace; CRDs with ``scope: Cluster`` are added per repo.
CLUSTER_SCOPED_KINDS = frozenset(
    {
        "Namespace",
        "Node",
        "PersistentVolume",
        "StorageClass",
        "CSIDriver",
        "CSINode",
        "VolumeAttachment",
        "CustomResourceDefinition",
        "APIService",
        "ClusterRole",
        "ClusterRoleBinding",
        "PriorityClass",
        "RuntimeClass",
        "IngressClass",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "CertificateSigningRequest",
        "FlowSchema",
        "PriorityLevelConfiguration",
    }
)


@dataclass(frozen=True, slots=True)
class RenderedObject:
    """One object to apply, with the module and version it belongs to."""

    module: str
    version: str
    body: Mapping[str, Any]
    default_configuration: bool = False
    #: On the default configuration: the fields the channel and the runtime enforce (already
    #: merged into ``body``; docs/configuration.md).
    override: ConfigOverride | None = None

    @property
    def subject(self) -> str:
        """``Kind/namespace/name`` (``Kind/name`` for cluster-scoped objects)."""
        return ObjectRef.of(self.body).subject


@dataclass(slots=True)
class Renderer:
    """Renders runtimes of one repo; caches each (module, version)'s prepared objects."""

    repo: ConfigRepo
    _prepared: dict[tuple[str, ...], list[RenderedObject]] = field(default_factory=dict)
    _cluster_kinds: frozenset[tuple[str, str]] | None = None

    def render(self, resolution: Resolution, modules: Iterable[str] = ()) -> list[RenderedObject]:
        """The objects of ``resolution``'s runtime, in apply order; ``modules`` narrows."""
        wanted = set(modules)
        rendered: list[RenderedObject] = []
        for resolved in resolution.modules:
            if wanted and resolved.name not in wanted:
                continue
            override = self.override(resolution, resolved)
            runtime = resolution.runtime.name
            rendered.extend(
                self._stamp(o, runtime, override) for o in self.prepare(resolved, runtime)
            )
        return rendered

    def override(self, resolution: Resolution, resolved: ResolvedModule) -> ConfigOverride | None:
        """What the channel and the runtime enforce of ``resolved``'s configuration CR."""
        runtime = resolution.runtime
        channel = self.repo.channels.get(module_channel(runtime, resolved.name))
        return resolve_override(runtime, resolved, channel.config if channel else {})

    def prepare(self, resolved: ResolvedModule, runtime: str = "") -> list[RenderedObject]:
        """A module version's objects with everything but the runtime label, sorted. A
        templated version's objects are those rendered for ``runtime`` (core.templates),
        prepared once per distinct render."""
        module = self.repo.modules[resolved.name]
        source = module.versions[resolved.version].objects
        key: tuple[str, ...] = (resolved.name, resolved.version)
        if module.versions[resolved.version].kind.templated:
            template = self.repo.rendered.get((runtime, resolved.name))
            if template is None:  # never an empty module: that would prune everything
                raise RenderError(
                    f"module {resolved.name} {resolved.version} is a "
                    f"{module.versions[resolved.version].kind} and was not rendered for "
                    f"runtime {runtime or '?'} (the repo was read without a renderer)"
                )
            source = template.objects
            key = (*key, template.key)
        prepared = self._prepared.get(key)
        if prepared is None:
            prepared = self._prepared[key] = self._prepare(module, resolved.version, source)
        return prepared

    def _prepare(
        self, module: Module, version: str, source: Sequence[Mapping[str, Any]]
    ) -> list[RenderedObject]:
        content = module.versions[version]
        objects = [
            RenderedObject(module.name, version, self._object(o, module, version)) for o in source
        ]
        objects.sort(key=lambda o: apply_order_key(o.body))
        if content.default_configuration is not None:
            body = self._object(content.default_configuration, module, version)
            body["metadata"]["annotations"][ANNOTATION_DEFAULT_CONFIGURATION] = "true"
            objects.append(RenderedObject(module.name, version, body, default_configuration=True))
        return objects

    def _object(self, source: Mapping[str, Any], module: Module, version: str) -> dict[str, Any]:
        body = copy.deepcopy(dict(source))
        metadata = body.setdefault("metadata", {})
        if not self._cluster_scoped(body) and not metadata.get("namespace"):
            metadata["namespace"] = module.namespace
        labels = metadata["labels"] = dict(metadata.get("labels") or {})
        labels[LABEL_MANAGED_BY] = MANAGED_BY_VALUE
        labels[LABEL_MODULE] = module.name
        annotations = metadata["annotations"] = dict(metadata.get("annotations") or {})
        annotations[ANNOTATION_MODULE_VERSION] = version
        return body

    def _stamp(
        self, rendered: RenderedObject, runtime: str, override: ConfigOverride | None
    ) -> RenderedObject:
        body = dict(rendered.body)
        metadata = dict(body["metadata"])
        metadata["labels"] = {**metadata["labels"], LABEL_RUNTIME: runtime}
        body["metadata"] = metadata
        if not rendered.default_configuration or override is None:
            return RenderedObject(
                rendered.module, rendered.version, body, rendered.default_configuration
            )
        body = apply_override(body, override)
        return RenderedObject(rendered.module, rendered.version, body, True, override)

    def hooks(self, resolved: ResolvedModule, runtime: str) -> tuple[Mapping[str, Any], ...]:
        """The Helm hooks of ``resolved``'s chart render for ``runtime`` (the same render as its
        objects), each in the module's namespace when it names none and labelled with its
        module (``reconciler.dev/hook-of``, never ours: no inventory holds a hook); none when
        the module skips or refuses them (``spec.hooks``) or its version is no chart."""
        module = self.repo.modules[resolved.name]
        template = self.repo.rendered.get((runtime, resolved.name))
        if template is None or module.hooks is not HookPolicy.RUN:
            return ()
        prepared = []
        for source in template.hooks:
            body = copy.deepcopy(dict(source))
            metadata = body.setdefault("metadata", {})
            if not self._cluster_scoped(body) and not metadata.get("namespace"):
                metadata["namespace"] = module.namespace
            metadata["labels"] = {**(metadata.get("labels") or {}), LABEL_HOOK_OF: module.name}
            prepared.append(body)
        return tuple(prepared)

    def _cluster_scoped(self, body: Mapping[str, Any]) -> bool:
        kind = str(body.get("kind", ""))
        if kind in CLUSTER_SCOPED_KINDS:
            return True
        group = str(body.get("apiVersion", "")).rpartition("/")[0]
        return (group, kind) in self.cluster_scoped_custom_kinds()

    def cluster_scoped_custom_kinds(self) -> frozenset[tuple[str, str]]:
        """(group, kind) of every CRD in the repo declared with ``scope: Cluster``."""
        if self._cluster_kinds is None:
            self._cluster_kinds = frozenset(_cluster_scoped_crds(self.repo))
        return self._cluster_kinds


def apply_order_key(body: Mapping[str, Any]) -> tuple[int, str, str, str]:
    """Sort key of the apply order; deletion uses the reverse."""
    kind = str(body.get("kind", ""))
    metadata = body.get("metadata", {})
    rank = _RANK.get(kind, len(KIND_ORDER))
    return rank, kind, str(metadata.get("namespace", "")), str(metadata.get("name", ""))


def _cluster_scoped_crds(repo: ConfigRepo) -> Iterable[tuple[str, str]]:
    rendered = (o for r in repo.rendered.values() for o in r.objects)
    static = (o for m in repo.modules.values() for v in m.versions.values() for o in v.objects)
    for objects in (static, rendered):
        for obj in objects:
            if obj.get("kind") != "CustomResourceDefinition":
                continue
            spec = obj.get("spec", {})
            if spec.get("scope") == "Cluster":
                yield str(spec.get("group", "")), str(spec.get("names", {}).get("kind", ""))


def removal_order(names: Sequence[str], dependencies: Mapping[str, tuple[str, ...]]) -> list[str]:
    """Modules to remove, each before the modules it depends on; ties by name."""
    pending = set(names)
    ordered: list[str] = []
    while pending:
        # a module can go when no other pending module depends on it
        free = sorted(n for n in pending if not any(n in dependencies.get(o, ()) for o in pending))
        batch = free or sorted(pending)[:1]
        ordered.extend(batch)
        pending -= set(batch)
    return ordered


def deletion_order(refs: Sequence[ObjectRef]) -> list[ObjectRef]:
    """Reverse apply order: workloads first, RBAC after, CRDs and Namespaces last."""
    as_bodies = [(apply_order_key(_stub(r)), r) for r in refs]
    return [r for _, r in sorted(as_bodies, key=lambda pair: pair[0], reverse=True)]


def _stub(ref: ObjectRef) -> dict[str, Any]:
    return {"kind": ref.kind, "metadata": {"namespace": ref.namespace, "name": ref.name}}
