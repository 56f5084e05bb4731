"""Recorded clusters: load an in-memory cluster from a snapshot file and save it back.

A snapshot read is a YAML stream of objects, or a ``kind: List`` with ``items`` (what
``kubectl get -o yaml`` or ``-o json`` prints), so a real cluster can be recorded with kubectl and
planned against offline. A snapshot written is a ``v1`` ``List`` in JSON, as ``kubectl get -o
json`` prints it but with one object per line: every YAML reader (kubectl included) reads it,
and reading and writing it costs a thirtieth and a twentieth of YAML's. Field owners travel in
``metadata.managedFields``. Callers: the CLI (``--snapshot``), tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from reconciler.cluster.memory import InMemoryCluster
from reconciler.errors import ReconcilerError, SourceError

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: What a saved snapshot starts and ends with: a ``v1`` ``List`` around the objects.
_HEAD = '{"apiVersion": "v1", "kind": "List", "items": ['
_TAIL = "\n]}\n"


def load_snapshot(path: Path) -> InMemoryCluster:
    """An in-memory cluster holding the objects of ``path``; an empty one if it does not exist."""
    return load_into(InMemoryCluster(), path)


def load_into(cluster: InMemoryCluster, path: Path) -> InMemoryCluster:
    """``cluster`` with the objects of ``path`` added (none when it does not exist);
    :class:`SourceError` naming the file when it is no snapshot."""
    if not path.exists():
        return cluster
    try:
        documents = _documents(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError, RecursionError) as error:
        reason = " ".join(str(error).split()) or type(error).__name__  # one line, as ours are
        raise SourceError(f"{path}: cannot read the snapshot: {reason}") from error
    try:
        cluster.load(list(_objects(documents)), owned=True)
    except (KeyError, TypeError, ValueError) as error:
        raise SourceError(f"{path}: not a snapshot of Kubernetes objects: {error!r}") from error
    except ReconcilerError as error:  # e.g. a custom resource whose CRD is not in the snapshot
        raise SourceError(f"{path}: {error}") from error
    cluster.writes = 0
    return cluster


def save_snapshot(cluster: InMemoryCluster, path: Path) -> None:
    """Write every object of ``cluster`` to ``path``: a ``v1`` ``List`` in JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    items = ",".join(cluster.snapshot_parts(_dump))
    path.write_text(f"{_HEAD}{items}{_TAIL}" if items else f"{_HEAD}]}}\n", encoding="utf-8")


def _dump(body: Mapping[str, Any]) -> str:
    """One item of the list, on a line of its own (``grep`` shows whole objects, ``jq`` pretty
    prints them; an indenting encoder would cost five times as much)."""
    # str: a value YAML typed that JSON has no type for (a recorded ``2024-01-01``) as its text
    return "\n" + json.dumps(body, sort_keys=True, default=str)


def _documents(text: str) -> list[Any]:
    """The documents of a snapshot's text: JSON (what a save writes, and ``kubectl get -o
    json``) read as JSON; anything else, or JSON that is not strict, as a YAML stream."""
    if text.lstrip().startswith("{"):
        try:
            return [json.loads(text)]
        except json.JSONDecodeError:
            pass  # YAML's flow style is looser than JSON: let the YAML parser judge it
    return list(yaml.load_all(text, Loader=_Loader))


def _objects(documents: list[Any]) -> Iterator[Mapping[str, Any]]:
    for document in documents:
        if document is None:
            continue
        if not isinstance(document, Mapping):
            raise ValueError("a snapshot document is not a mapping")
        if document.get("kind") == "List" or str(document.get("kind", "")).endswith("List"):
            items = document.get("items") or []
            if not isinstance(items, list):
                raise ValueError("the items of a snapshot list are not a list")
            for item in items:
                if item is not None and not isinstance(item, Mapping):
                    raise ValueError(f"an item of a snapshot list is not an object: {item!r:.40}")
                if item is not None:
                    yield item
        else:
            yield document


class SnapshotFileCluster(InMemoryCluster):
    """An in-memory cluster whose writes are saved to its snapshot file at each :meth:`flush`
    (the engine flushes after every step, before it records the step's end). The file is
    replaced whole (written beside it, then renamed), so a process that dies leaves it as it
    was at the last flush: an earlier state of the cluster, never a torn one, and never behind
    what the state store says was done."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.identity = f"snapshot {path.resolve()}"
        self.user = "(a snapshot: no access control)"
        load_into(self, path)  # read once, straight into this cluster
        self._saved = self.writes

    def flush(self) -> None:
        """Save the file if anything changed since the last save."""
        if self.writes != self._saved:
            temporary = self.path.with_name(self.path.name + ".tmp")
            save_snapshot(self, temporary)
            temporary.replace(self.path)
            self._saved = self.writes
