"""The renderer of every module kind: one engine per kind, chosen by the request (edge)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reconciler.core.model import ModuleKind, RenderedTemplate
from reconciler.core.templates import RenderRequest, TemplateRenderer
from reconciler.errors import RenderError
from reconciler.render.helm import HelmChartRenderer
from reconciler.render.kustomize import KustomizeRenderer
from reconciler.render.sources import SourceRenderer


@dataclass(frozen=True, slots=True)
class KindRenderer:
    """A :class:`TemplateRenderer` that hands each request to the engine of its kind."""

    engines: Mapping[ModuleKind, TemplateRenderer]

    def render(self, request: RenderRequest) -> RenderedTemplate:
        """The objects of ``request``, rendered by the engine of its template's kind."""
        engine = self.engines.get(request.template.kind)
        if engine is None:
            raise RenderError(
                f"module kind '{request.template.kind}' cannot be rendered here (no engine)",
                request.template.root,
            )
        return engine.render(request)


def default_renderer(source_cache: Path | None = None) -> KindRenderer:
    """The renderer the commands and the daemon use: Helm charts (the engine is loaded on the
    first chart rendered, so a repo without charts never loads it), Kustomize overlays, and
    sources pulled by digest (cached on disk: ``$RECONCILER_SOURCE_CACHE``, else
    ``source_cache``, else the user's cache folder; docs/sources.md)."""
    charts = HelmChartRenderer()
    return KindRenderer(
        {
            ModuleKind.CHART: charts,
            ModuleKind.KUSTOMIZE: KustomizeRenderer(),
            ModuleKind.SOURCE: SourceRenderer(source_cache, charts=charts),
        }
    )
