"""Helm charts rendered with Helm's own engine, offline (edge).

The engine is Helm v4's Go SDK behind a C ABI, through the ``helm-python-sdk`` package (pinned;
its import is ``helm_python``), used through this one module only. A chart is handed over as an
in-memory archive of its files (nothing is written to disk), rendered as ``helm template``
renders it: no cluster is contacted, ``lookup`` returns nothing, the release is named after the
module and lives in the module's namespace, ``.Capabilities`` are the request's (the runtime's
cluster as a sync recorded it, else the engine's defaults,
:data:`~reconciler.core.templates.DEFAULT_KUBE_VERSION`), and a chart's ``kubeVersion`` is
checked against a recorded cluster's version as ``helm install`` checks it (not against the
engine's default: nothing is known of a cluster no sync recorded, and its first sync must be
able to read the repo). The chart's ``crds/`` files come
first, as Helm installs them; hooks are kept apart (docs/charts.md), from the same render.

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
from typing import TYPE_CHECKING, Any

from reconciler.config.schema_refs import schema_reference_problems
from reconciler.core.model import RenderedTemplate
from reconciler.core.templates import RenderRequest
from reconciler.errors import RenderError
from reconciler.render.documents import is_hook, is_notes, objects_of
from reconciler.render.sandbox import Sandbox, shared_sandbox
from reconciler.render.worker import chart_archive as chart_archive  # the caller's name for it

if TYPE_CHECKING:
    import tarfile


@dataclass(slots=True)
class HelmChartRenderer:
    """Renders charts in ``sandbox`` (the process's by default); counts the renders it ran (the
    cache in front of it should keep that to one per distinct chart, values and capabilities)."""

    renders: int = 0
    sandbox: Sandbox = field(default_factory=shared_sandbox)

    def render(self, request: RenderRequest) -> RenderedTemplate:
        """The objects, hooks and notes of ``request``'s chart with its values."""
        self.renders += 1
        shown = request.template.root
        schemas = {**request.template.files, **packed_schemas(request.template.files)}
        for problem in schema_reference_problems(schemas, shown):  # validation refused them
            raise RenderError(f"line {problem.line}: {problem.message}", problem.path)
        archive = chart_archive(request.template.files)
        values = json.loads(json.dumps(request.values, default=str))  # YAML dates as strings
        names = (request.release_name, request.namespace)
        seen = request.capabilities
        told = (seen.kube_version, list(seen.api_versions), seen.recorded is not None)
        rendered: dict[str, str] = self.sandbox.run(
            "chart", (archive, values, *names, *told), shown
        )
        crds = [f for f in request.template.files if f.startswith("crds/")]
        crd_text = {f: request.template.files[f].decode() for f in crds}
        objects: list[Mapping[str, Any]] = []
        hooks: list[Mapping[str, Any]] = []
        for body in (*objects_of(crd_text, shown), *objects_of(rendered, shown)):
            (hooks if is_hook(body) else objects).append(body)
        notes = "".join(text for path, text in sorted(rendered.items()) if is_notes(path))
        return RenderedTemplate(tuple(objects), request.key, tuple(hooks), notes)


def packed_schemas(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """The ``values.schema.json`` files of the subcharts packed as archives under ``charts/``
    (Helm checks values against them too), by their path through the archives
    (``charts/db-1.0.0.tgz/db/values.schema.json``)."""
    found: dict[str, bytes] = {}
    for name in sorted(files):
        if name.startswith("charts/") and name.endswith(".tgz"):
            found.update(_archive_schemas(files[name], name, 0))
    return found


#: The largest member read from a packed subchart, and how deep subcharts of subcharts are
#: looked into (a larger or deeper one is the engine's to refuse).
MAX_MEMBER_BYTES = 5 * 1024 * 1024
MAX_DEPTH = 4


def _archive_schemas(data: bytes, shown: str, depth: int) -> dict[str, bytes]:
    import tarfile  # only when a chart renders (startup time of every command)

    found: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            for member in archive:
                if not member.isfile() or member.size > MAX_MEMBER_BYTES:
                    continue
                path = f"{shown}/{member.name}"
                if member.name.endswith("/values.schema.json"):
                    found[path] = _member_bytes(archive, member)
                elif "/charts/" in member.name and path.endswith(".tgz") and depth < MAX_DEPTH:
                    found.update(_archive_schemas(_member_bytes(archive, member), path, depth + 1))
    except (tarfile.TarError, OSError, EOFError):
        return found  # not an archive: the engine refuses the chart itself
    return found


def _member_bytes(archive: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    extracted = archive.extractfile(member)
    return extracted.read() if extracted is not None else b""
