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
from reconciler.core.objects import ObjectRef
from reconciler.errors import ReconcilerError, SourceError

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load_snapshot(path: Path) -> InMemoryCluster:
    """An in-memory cluster holding the objects of ``path``; an empty one if it does not exist."""
    return load_into(InMemoryCluster(), path)


def load_into(cluster: InMemoryCluster, path: Path) -> InMemoryCluster:
    """``cluster`` with the objects of ``path`` added (none when it does not exist);
    :class:`SourceError` naming the file when it is no snapshot."""
    if not path.exists():
        return cluster
    try:
        documents = list(yaml.load_all(path.read_text(encoding="utf-8"), Loader=_Loader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        reason = " ".join(str(error).split())  # one line, as every error of ours
        raise SourceError(f"{path}: cannot read the snapshot: {reason}") from error
    try:
        cluster.load(list(_objects(documents)))
    except (KeyError, TypeError, ValueError) as error:
        raise SourceError(f"{path}: not a snapshot of Kubernetes objects: {error!r}") from error
    except ReconcilerError as error:  # e.g. a custom resource whose CRD is not in the snapshot
        raise SourceError(f"{path}: {error}") from error
    cluster.writes = 0
    return cluster


def save_snapshot(cluster: InMemoryCluster, path: Path) -> None:
    """Write every object of ``cluster`` to ``path`` as a YAML stream (``---`` before each)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(cluster.snapshot_text(_dump), encoding="utf-8")


def _dump(body: Mapping[str, Any]) -> str:
    return str(yaml.dump(dict(body), Dumper=_Dumper, sort_keys=True, explicit_start=True))


def _objects(documents: list[Any]) -> Iterator[Mapping[str, Any]]:
    for document in documents:
        if document is None:
            continue
        if not isinstance(document, Mapping):
            raise ValueError("a snapshot document is not a mapping")
        if document.get("kind") == "List" or str(document.get("kind", "")).endswith("List"):
            yield from document.get("items") or []
        else:
            yield document


class SnapshotFileCluster(InMemoryCluster):
    """An in-memory cluster saved to its snapshot file after every change, so that a process
    that dies leaves the file as the cluster was (offline rehearsals survive a crash)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.identity = f"snapshot {path.resolve()}"
        self.user = "(a snapshot: no access control)"
        load_into(self, path)  # read once, straight into this cluster

    def apply(
        self,
        body: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Apply, then save the file if anything changed."""
        before = self.writes
        result = super().apply(body, field_manager=field_manager, force=force, dry_run=dry_run)
        self._save_if_changed(before)
        return result

    def patch(self, ref: ObjectRef, merge_patch: Mapping[str, Any]) -> dict[str, Any]:
        """Patch, then save the file if anything changed."""
        before = self.writes
        result = super().patch(ref, merge_patch)
        self._save_if_changed(before)
        return result

    def delete(self, ref: ObjectRef, *, propagation: str = "Background") -> bool:
        """Delete, then save the file if anything changed."""
        before = self.writes
        result = super().delete(ref, propagation=propagation)
        self._save_if_changed(before)
        return result

    def _save_if_changed(self, before: int) -> None:
        if self.writes != before:
            temporary = self.path.with_name(self.path.name + ".tmp")
            save_snapshot(self, temporary)
            temporary.replace(self.path)
