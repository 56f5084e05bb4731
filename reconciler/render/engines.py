"""The renderer of every module kind: one engine per kind, chosen by the request (edge).

Each engine's module is imported on the first request of its kind (:class:`OnFirstUse`), so a
repo of plain manifests never imports the engines (``tests/cli/test_cli_imports.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from reconciler.core.model import ModuleKind, RenderedTemplate
from reconciler.core.templates import RenderRequest, TemplateRenderer
from reconciler.errors import RenderError

if TYPE_CHECKING:
    from reconciler.render.helm import HelmChartRenderer

E = TypeVar("E", bound=TemplateRenderer)


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


class OnFirstUse(Generic[E]):
    """An engine built (its module imported) when it is first asked for."""

    def __init__(self, build: Callable[[], E]) -> None:
        self._build = build
        self._engine: E | None = None

    def engine(self) -> E:
        """The engine, built on the first call."""
        if self._engine is None:
            self._engine = self._build()
        return self._engine

    def render(self, request: RenderRequest) -> RenderedTemplate:
        """See :class:`TemplateRenderer`."""
        return self.engine().render(request)


def default_renderer(
    source_cache: Path | None = None, charts: HelmChartRenderer | None = None
) -> KindRenderer:
    """The renderer the commands and the daemon use: Helm charts (the engine is loaded on the
    first chart rendered, so a repo without charts never loads it), Kustomize overlays, and
    sources pulled by digest (cached on disk: ``$RECONCILER_SOURCE_CACHE``, else
    ``source_cache``, else the user's cache folder; docs/sources.md). Every engine runs in the
    renderer sandbox (:mod:`reconciler.render.sandbox`); ``charts``: another chart engine
    (tests: one with a sandbox of their own limits)."""
    chart_engine = OnFirstUse(_charts if charts is None else lambda: charts)
    return KindRenderer(
        {
            ModuleKind.CHART: chart_engine,
            ModuleKind.KUSTOMIZE: OnFirstUse(_kustomize),
            ModuleKind.SOURCE: OnFirstUse(lambda: _sources(source_cache, chart_engine.engine())),
        }
    )


def _charts() -> HelmChartRenderer:
    from reconciler.render.helm import HelmChartRenderer

    return HelmChartRenderer()


def _kustomize() -> TemplateRenderer:
    from reconciler.render.kustomize import KustomizeRenderer

    return KustomizeRenderer()


def _sources(cache: Path | None, charts: HelmChartRenderer) -> TemplateRenderer:
    from reconciler.render.sources import SourceRenderer

    return SourceRenderer(cache, charts=charts)
