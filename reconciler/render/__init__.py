"""Rendering of templated module versions (the edge the core's ``TemplateRenderer`` names).

:func:`default_renderer` dispatches each :class:`~reconciler.core.templates.RenderRequest` by the
version's kind: charts to Helm's own engine (:mod:`reconciler.render.helm`); the other kinds plug
in beside it (``kustomize``, ``source``). The core never imports this package: the commands, the
daemon and the review read the repo with ``load_repo(..., renderer=default_renderer())``.
"""

from __future__ import annotations

from reconciler.render.engines import KindRenderer, default_renderer

__all__ = ["KindRenderer", "default_renderer"]
