"""Rendered manifests into objects, split as Helm splits them (edge: parses text).

Helm cuts a rendered template at every line starting ``---`` (``releaseutil.SplitManifests``:
the pattern ``(?:^|\\s*\\n)---\\s*``), so ``---# comment`` starts a document, which a plain YAML
reader would refuse. Each piece is then read by our safe reader (rule C6 holds for rendered
text too); empty pieces are dropped. ``NOTES.txt`` is text for people, never YAML. Objects
annotated ``helm.sh/hook`` are kept apart as hooks (docs/charts.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from reconciler.config.yamlsafe import parse_yaml
from reconciler.errors import RenderError

_SEPARATOR = re.compile(r"(?:^|\s*\n)---\s*")
HOOK_ANNOTATION = "helm.sh/hook"


def split_manifest(text: str) -> list[str]:
    """The documents of one rendered template, as Helm cuts them (empty ones dropped)."""
    return [part for part in _SEPARATOR.split(text) if part.strip()]


def is_notes(path: str) -> bool:
    """Whether a rendered file is the chart's notes (text, not objects)."""
    return path.rsplit("/", 1)[-1] == "NOTES.txt"


def objects_of(rendered: Mapping[str, str], shown: str) -> Iterator[Mapping[str, Any]]:
    """Every object of the rendered files (sorted by path), notes aside."""
    for path in sorted(rendered):
        if is_notes(path):
            continue
        for index, piece in enumerate(split_manifest(rendered[path])):
            documents, problems = parse_yaml(piece, f"{shown}:{path}")
            if problems:
                raise RenderError(f"{path} (document {index + 1}): {problems[0].message}", shown)
            for document in documents:
                if document.data is None:
                    continue
                if not isinstance(document.data, Mapping) or "kind" not in document.data:
                    message = f"{path} (document {index + 1}) is not a Kubernetes object"
                    raise RenderError(message, shown)
                yield document.data


def is_hook(body: Mapping[str, Any]) -> bool:
    """Whether ``body`` is a Helm hook (annotated ``helm.sh/hook``)."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    return HOOK_ANNOTATION in annotations
