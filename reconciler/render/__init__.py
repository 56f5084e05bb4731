"""Rendering of templated module versions (the edge the core's ``TemplateRenderer`` names).

:func:`default_renderer` dispatches each :class:`~reconciler.core.templates.RenderRequest` by the
version's kind: charts to Helm's own engine (:mod:`reconciler.render.helm`); the other kinds plug
in beside it (``kustomize``, ``source``). The core never imports this package: the commands, the
daemon and the review read the repo with ``load_repo(..., renderer=default_renderer())``. Both
names are imported on first use, so that a render worker (:mod:`reconciler.render.worker`), which
imports this package first, starts without the core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reconciler.render.engines import KindRenderer, default_renderer

__all__ = ["KindRenderer", "default_renderer"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from reconciler.render import engines

        return getattr(engines, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
