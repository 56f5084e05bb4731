"""Checks and typed values of templated module versions and their values (pure).

A version folder's kind is decided by the one file it holds (docs/charts.md): ``manifest.yaml``
(manifest), ``chart/Chart.yaml`` (chart), ``kustomization.yaml`` (kustomize) or ``source.yaml``
(source); none or several is a C2/C4 error, and ``spec.versions.<v>.kind`` in ``module.yaml``,
when given, must agree (C4). Values come from the version's ``values.yaml``, a channel's
``spec.values`` and a runtime's module entry (``valuesFrom`` a file of the repo, then
``values``): each must be a mapping, and a ``valuesFrom`` file one mapping document inside the
repo, scanned for credentials like every other file (C6). Callers: the validator.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from reconciler.config.raw import RawFile, RawVersion
from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic, Pointer
from reconciler.core.model import ModuleKind, TemplateSource
from reconciler.core.templates import merge_values

#: The file that marks each kind, in the order they are named in messages.
MARKERS: Mapping[str, ModuleKind] = {
    "manifest.yaml": ModuleKind.MANIFEST,
    "chart/Chart.yaml": ModuleKind.CHART,
    "kustomization.yaml": ModuleKind.KUSTOMIZE,
    "source.yaml": ModuleKind.SOURCE,
}


def version_kind(raw: RawVersion) -> tuple[ModuleKind | None, Diagnostic | None]:
    """The kind of a version folder, or the reason it has none."""
    if len(raw.markers) == 1:
        return MARKERS[raw.markers[0]], None
    if not raw.markers:
        message = "version folder has no manifest.yaml"  # nor a file of another kind
        return None, Diagnostic(raw.path + "/manifest.yaml", 1, 1, "C2", message)
    found = " and ".join(raw.markers)
    message = f"version folder holds {found}: one kind per version (keep one of them)"
    return None, Diagnostic(f"{raw.path}/{raw.markers[1]}", 1, 1, "C4", message)


def declared_kind_problem(
    document: Document, version: str, declared: str, kind: ModuleKind
) -> Diagnostic | None:
    """C4: ``spec.versions.<version>.kind`` of ``module.yaml`` against the folder's kind."""
    if declared == kind.value:
        return None
    message = f"version {version} is declared kind '{declared}' but its folder holds a {kind.value}"
    return document.diagnostic("C4", message, ("spec", "versions", version, "kind"))


def values_mapping(file: RawFile | None, what: str) -> tuple[Document | None, list[Diagnostic]]:
    """The one mapping document of a values file (an empty file is no values), or problems."""
    if file is None or file.broken or not file.documents:
        return None, []
    if len(file.documents) > 1:
        message = f"{what} must be one document, found {len(file.documents)}"
        return None, [file.documents[1].diagnostic("C1", message, ())]
    document = file.documents[0]
    if document.data is None:
        return None, []
    if not isinstance(document.data, Mapping):
        return None, [document.diagnostic("C1", f"{what} must be a mapping of values", ())]
    return document, []


def template_source(raw: RawVersion, kind: ModuleKind, values: Document | None) -> TemplateSource:
    """The typed template of a version folder (its files as the loader read them)."""
    data: Mapping[str, Any] = values.data if values is not None else {}
    values_path = raw.values.path if raw.values is not None else ""
    if raw.template is None:  # a source: what it names is fetched by the renderer's edge
        source = raw.source
        body = source.documents[0].data if source is not None and source.documents else {}
        text = repr(sorted(body.items())) if isinstance(body, Mapping) else ""
        files = {"source.yaml": text.encode()}
        return TemplateSource(kind, "source:" + text, files, raw.path, data, values_path)
    return TemplateSource(
        kind, raw.template.digest, raw.template.files, raw.template.root, data, values_path
    )


def values_from_problem(document: Document, at: Pointer, path: str) -> Diagnostic | None:
    """C6: a ``valuesFrom`` path must be relative and stay inside the repo."""
    normal = posixpath.normpath(path) if path else path
    if path and not posixpath.isabs(path) and not normal.startswith(".."):
        return None
    message = (
        "valuesFrom must name a file inside the repo (a relative path that does not climb out)"
    )
    return document.diagnostic("C6", message, at)


def entry_values(
    inline: Mapping[str, Any] | None, from_file: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """A runtime entry's values: its ``valuesFrom`` file, then its ``values`` over it."""
    if inline is None and from_file is None:
        return None
    return merge_values(from_file or {}, inline or {})
