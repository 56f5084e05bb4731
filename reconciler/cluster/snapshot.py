"""Recorded clusters: load an in-memory cluster from a YAML file and save it back.

A snapshot is a YAML stream of objects, or a ``kind: List`` with ``items`` (what
``kubectl get -o yaml`` prints), so a real cluster can be recorded with kubectl and planned
against offline. Field owners travel in ``metadata.managedFields``. Callers: the CLI
(``--snapshot``), tests.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from reconciler.cluster.memory import InMemoryCluster
from reconciler.errors import ReconcilerError, SourceError

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load_snapshot(path: Path) -> InMemoryCluster:
    """An in-memory cluster holding the objects of ``path``; an empty one if it does not exist."""
    cluster = InMemoryCluster()
    if not path.exists():
        return cluster
    try:
        documents = list(yaml.load_all(path.read_text(encoding="utf-8"), Loader=_Loader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise SourceError(f"{path}: cannot read the snapshot: {error}") from error
    try:
        cluster.load(list(_objects(documents)))
    except (KeyError, TypeError, ValueError) as error:
        raise SourceError(f"{path}: not a snapshot of Kubernetes objects: {error!r}") from error
    except ReconcilerError as error:  # e.g. a custom resource whose CRD is not in the snapshot
        raise SourceError(f"{path}: {error}") from error
    cluster.writes = 0
    return cluster


def save_snapshot(cluster: InMemoryCluster, path: Path) -> None:
    """Write every object of ``cluster`` to ``path`` as a YAML stream."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.dump_all(cluster.snapshot(), Dumper=_Dumper, sort_keys=True)
    path.write_text(text, encoding="utf-8")


def _objects(documents: list[Any]) -> Iterator[Mapping[str, Any]]:
    for document in documents:
        if document is None:
            continue
        if not isinstance(document, Mapping):
            raise ValueError("a snapshot document is not a mapping")
        if document.get("kind") == "List" or str(document.get("kind", "")).endswith("List"):
            yield from document.get("items", [])
        else:
            yield document
