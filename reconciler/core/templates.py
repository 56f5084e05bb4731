"""Rendering of templated module versions after resolution: the seam and its cache (pure).

A chart's objects depend on the values of the runtime that takes it, so they are not read with
the repo: after each runtime is resolved, every templated module it gets (a chart, a Kustomize
overlay, a fetched source) is rendered through a :class:`TemplateRenderer` that the edge injects
(``reconciler.render``; the core never imports it). Values are layered, weakest first: the
chart's own defaults (applied by the engine), the version's ``values.yaml``, the channel's
``spec.values`` of the module, the runtime's module entry (``valuesFrom`` a file of the repo,
then ``values``). Mappings merge key by key; anything else replaces; ``null`` removes a default
(as Helm does).

A chart sees the runtime's cluster as ``.Capabilities`` (:class:`Capabilities`): its Kubernetes
version and the API versions it serves, as the last sync recorded them (a sync re-renders with
what its cluster says now: ``reconciler.operations.capabilities``); a runtime none was recorded
for gets the engine's defaults.

Renders are cached by content (:class:`RenderCache`): the template's digest, a hash of the
merged values, the capabilities the engine is told, the release name and namespace. So a fleet
of 1,000 runtimes using one chart with 3 distinct value sets renders 3 times. Callers: the
validator (``config.validate``) when the loader was given a renderer; everything downstream reads
the result from :attr:`ConfigRepo.rendered <reconciler.core.model.ConfigRepo>`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from reconciler.core.model import (
    Channel,
    ConfigRepo,
    Module,
    ModuleKind,
    ModuleVersion,
    RenderedTemplate,
    Runtime,
    TemplateSource,
)
from reconciler.core.overrides import module_channel
from reconciler.core.resolve import resolve_runtime
from reconciler.errors import RenderError

#: The Kubernetes version a chart sees as ``.Capabilities.KubeVersion``: the default of the
#: engine (Helm v4.2.3; docs/charts.md). Part of every render's cache key.
DEFAULT_KUBE_VERSION = "v1.36.0"


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a chart sees as ``.Capabilities`` of the cluster it is rendered for: the Kubernetes
    version (``.Capabilities.KubeVersion``) and the API versions served (``group/version`` and
    ``group/version/Kind``, as Helm lists them from discovery), with when a sync recorded them
    (``None``: the engine's defaults, nothing recorded)."""

    kube_version: str = DEFAULT_KUBE_VERSION
    api_versions: tuple[str, ...] = ()
    recorded: datetime | None = None

    @property
    def part_of_key(self) -> str:
        """What of these capabilities changes a render: the versions, and whether they were
        recorded of a cluster (a chart's ``kubeVersion`` is checked only then), not when."""
        seen = "recorded" if self.recorded is not None else "default"
        return "\0".join((seen, self.kube_version, *self.api_versions))

    def same_as(self, other: Capabilities | None) -> bool:
        """Whether ``other`` renders as these do."""
        return other is not None and other.part_of_key == self.part_of_key

    def describe(self) -> str:
        """``Kubernetes v1.31.0 and 52 API versions, recorded at the last sync (...)``, or the
        engine default."""
        if self.recorded is None:
            return f"the engine default (Kubernetes {self.kube_version})"
        when = self.recorded.strftime("%Y-%m-%d %H:%M UTC")
        return (
            f"its cluster's (Kubernetes {self.kube_version}, {len(self.api_versions)} API "
            f"versions, recorded by the sync of {when})"
        )


#: What a runtime no sync recorded anything for renders with.
ENGINE_DEFAULT = Capabilities()


@dataclass(frozen=True, slots=True)
class RenderRequest:
    """One render: a template, the merged values, and what the engine is told of the release.

    The release is named after the module and lives in the module's namespace; no cluster is
    asked anything (``lookup`` finds nothing, as in ``helm template``)."""

    module: str
    version: str
    template: TemplateSource
    values: Mapping[str, Any]
    release_name: str
    namespace: str
    capabilities: Capabilities = ENGINE_DEFAULT

    @property
    def key(self) -> str:
        """The cache key: equal keys render equal output."""
        parts = (
            self.template.digest,
            values_hash(self.values),
            self.capabilities.part_of_key,
            self.release_name,
            self.namespace,
        )
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()


class TemplateRenderer(Protocol):
    """Renders one request into objects (the edge: ``reconciler.render``)."""

    def render(self, request: RenderRequest) -> RenderedTemplate:
        """The objects of ``request``; raises :class:`~reconciler.errors.RenderError`."""


@dataclass(slots=True)
class RenderCache:
    """Renders by key, and how many renders ran (the others were answered from memory).
    A failed render is remembered too, so a fleet reports it once per key, not per runtime."""

    _done: dict[str, RenderedTemplate | RenderError] = field(default_factory=dict)
    renders: int = 0

    def render(self, renderer: TemplateRenderer, request: RenderRequest) -> RenderedTemplate:
        """``renderer.render(request)``, from memory when its key was rendered before."""
        key = request.key
        found = self._done.get(key)
        if found is None:
            self.renders += 1
            try:
                found = renderer.render(request)
            except RenderError as error:
                found = error
            self._done[key] = found
        if isinstance(found, RenderError):
            raise found
        return found


@dataclass(frozen=True, slots=True)
class RenderFailure:
    """A templated version that could not be rendered for a runtime."""

    runtime: str
    module: str
    version: str
    message: str
    path: str


def values_hash(values: Mapping[str, Any]) -> str:
    """A hash of ``values`` that does not depend on key order."""
    text = json.dumps(values, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def merge_values(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` layered on ``base``: mappings merged key by key, anything else replaced."""
    merged = dict(base)
    for key, value in over.items():
        below = merged.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            merged[key] = merge_values(below, value)
        else:
            merged[key] = value
    return merged


def runtime_values(
    runtime: Runtime, module: str, version: ModuleVersion, channel: Channel | None
) -> dict[str, Any]:
    """The values ``runtime`` renders ``version`` of ``module`` with (chart defaults aside)."""
    template = version.template
    merged = dict(template.values) if template is not None else {}
    if channel is not None:
        merged = merge_values(merged, channel.values.get(module, {}))
    entry = next((m for m in runtime.modules if m.name == module), None)
    if entry is not None and entry.values is not None:
        merged = merge_values(merged, entry.values)
    return merged


def render_request(
    repo: ConfigRepo,
    runtime: Runtime,
    module: Module,
    version: str,
    capabilities: Capabilities = ENGINE_DEFAULT,
) -> RenderRequest:
    """What rendering ``version`` of ``module`` for ``runtime`` (whose cluster has
    ``capabilities``) asks of the engine."""
    content = module.versions[version]
    assert content.template is not None
    channel = repo.channels.get(module_channel(runtime, module.name))
    values = runtime_values(runtime, module.name, content, channel)
    return RenderRequest(
        module.name,
        version,
        content.template,
        values,
        module.name,
        module.namespace,
        capabilities,
    )


def render_repo(
    repo: ConfigRepo,
    renderer: TemplateRenderer,
    cache: RenderCache | None = None,
    capabilities: Mapping[str, Capabilities] | None = None,
) -> tuple[dict[tuple[str, str], RenderedTemplate], list[RenderFailure]]:
    """Every templated module of every runtime of ``repo``, rendered (through ``cache``) with
    each runtime's ``capabilities`` (else the engine's defaults)."""
    cache = cache if cache is not None else RenderCache()
    rendered: dict[tuple[str, str], RenderedTemplate] = {}
    failures: list[RenderFailure] = []
    for runtime in repo.runtimes.values():
        if not any(
            repo.modules[m.name].versions[m.version].template is not None
            for m in resolve_runtime(repo, runtime).modules
        ):
            continue  # nothing to render: the capabilities (maybe read lazily) not asked
        known = capabilities if capabilities is not None else {}
        done, failed = render_runtime(
            repo, runtime, renderer, cache, known.get(runtime.name, ENGINE_DEFAULT)
        )
        rendered.update(((runtime.name, name), template) for name, template in done.items())
        failures.extend(failed)
    return rendered, failures


def render_runtime(
    repo: ConfigRepo,
    runtime: Runtime,
    renderer: TemplateRenderer,
    cache: RenderCache,
    capabilities: Capabilities = ENGINE_DEFAULT,
) -> tuple[dict[str, RenderedTemplate], list[RenderFailure]]:
    """The templated modules ``runtime`` gets, by module, rendered for a cluster of
    ``capabilities``, and those that failed."""
    rendered: dict[str, RenderedTemplate] = {}
    failures: list[RenderFailure] = []
    for resolved in resolve_runtime(repo, runtime).modules:
        module = repo.modules[resolved.name]
        if module.versions[resolved.version].template is None:
            continue
        request = render_request(repo, runtime, module, resolved.version, capabilities)
        try:
            rendered[module.name] = cache.render(renderer, request)
        except RenderError as error:
            failure = RenderFailure(
                runtime.name, module.name, resolved.version, str(error), error.path
            )
            failures.append(failure)
    return rendered, failures


def gets_a_chart(repo: ConfigRepo, runtime: str) -> bool:
    """Whether ``runtime`` gets a chart (whose render depends on its cluster's capabilities)."""
    resolution = resolve_runtime(repo, repo.runtimes[runtime])
    return any(
        repo.modules[m.name].versions[m.version].kind is ModuleKind.CHART
        for m in resolution.modules
    )
