"""Helm charts rendered with Helm's own engine, offline (edge).

The engine is Helm v4's Go SDK behind a C ABI, through the ``helm-python-sdk`` package (pinned;
its import is ``helm_python``), used through this one module only. A chart is handed over as an
in-memory archive of its files (nothing is written to disk), rendered as ``helm template``
renders it: no cluster is contacted, ``lookup`` returns nothing, the release is named after the
module and lives in the module's namespace, ``.Capabilities`` are the engine's defaults
(:data:`~reconciler.core.templates.DEFAULT_KUBE_VERSION`). The chart's ``crds/`` files come
first, as Helm installs them; hooks are kept apart, test hooks dropped (docs/charts.md).

The engine runs in a worker of the renderer sandbox (:mod:`reconciler.render.sandbox`, the job
``chart`` of :mod:`reconciler.render.worker`), never in the caller's process: a template that
exhausts Go's memory or stack, or loops, stops its worker and is a :class:`RenderError` of the
chart.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.core.model import RenderedTemplate
from reconciler.core.templates import RenderRequest
from reconciler.render.documents import is_hook, is_notes, objects_of
from reconciler.render.sandbox import Sandbox, shared_sandbox

#: Hook kinds that are never run: ``helm test`` is not part of a sync.
TEST_HOOKS = frozenset({"test", "test-success", "test-failure"})


@dataclass(slots=True)
class HelmChartRenderer:
    """Renders charts in ``sandbox`` (the process's by default); counts the renders it ran (the
    cache in front of it should keep that to one per distinct chart, values and capabilities)."""

    renders: int = 0
    sandbox: Sandbox = field(default_factory=shared_sandbox)

    def render(self, request: RenderRequest) -> RenderedTemplate:
        """The objects, hooks and notes of ``request``'s chart with its values."""
        self.renders += 1
        archive = chart_archive(request.template.files)
        values = json.loads(json.dumps(request.values, default=str))  # YAML dates as strings
        names = (request.release_name, request.namespace)
        rendered: dict[str, str] = self.sandbox.run(
            "chart", (archive, values, *names), request.template.root
        )
        crds = [f for f in request.template.files if f.startswith("crds/")]
        crd_text = {f: request.template.files[f].decode() for f in crds}
        objects, hooks = [], []
        shown = request.template.root
        for body in (*objects_of(crd_text, shown), *objects_of(rendered, shown)):
            if not is_hook(body):
                objects.append(body)
            elif not _hook_kinds(body) <= TEST_HOOKS:
                hooks.append(body)
        notes = "".join(text for path, text in sorted(rendered.items()) if is_notes(path))
        return RenderedTemplate(tuple(objects), request.key, tuple(hooks), notes)


def _hook_kinds(body: Mapping[str, Any]) -> set[str]:
    annotations = body["metadata"]["annotations"]
    return {h.strip() for h in str(annotations["helm.sh/hook"]).split(",")}


def chart_archive(files: Mapping[str, bytes]) -> bytes:
    """The chart's files as the ``.tgz`` Helm loads (one top folder), built in memory."""
    buffer = io.BytesIO()
    import tarfile  # only when a chart renders (startup time of every command)

    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name in sorted(files):
            data = files[name]
            info = tarfile.TarInfo(f"chart/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
