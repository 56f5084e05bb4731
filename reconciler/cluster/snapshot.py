"""Recorded clusters: load an in-memory cluster from a snapshot file and save it back.

A snapshot read is a YAML stream of objects, or a ``kind: List`` with ``items`` (what
``kubectl get -o yaml`` or ``-o json`` prints), so a real cluster can be recorded with kubectl and
planned against offline. A snapshot written is a ``v1`` ``List`` in JSON, as ``kubectl get -o
json`` prints it but with one object per line: every YAML reader (kubectl included) reads it,
and reading and writing it costs a thirtieth and a twentieth of YAML's. Field owners travel in
``metadata.managedFields``. Callers: the CLI (``--snapshot``), tests.

A saved file carries a **generation**, the list's ``metadata.resourceVersion``, one more at each
save. :class:`SnapshotFileCluster` saves under the lock of its folder, and only while the file is
still at the generation it read (compare-and-set): a process that read the file, was paused
while another saved it, and resumed refuses to save its stale copy over the other's
(:class:`~reconciler.errors.ConflictError`), whatever its own checks said before the pause
(issue 23).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from reconciler.cluster.api import ClusterIdentity
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.inventory import LABEL_INVENTORY
from reconciler.core.model import LABEL_RUNTIME
from reconciler.errors import AccessError, ConflictError, ReconcilerError, SnapshotError

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: What a saved snapshot starts and ends with: a ``v1`` ``List`` of a generation around the
#: objects.
_HEAD = '{{"apiVersion": "v1", "kind": "List", "metadata": {{"resourceVersion": "{}"}}, "items": ['
_TAIL = "\n]}\n"
#: The generation in the head of a saved file (a file kubectl wrote has none: generation 0).
_GENERATION = re.compile(
    r'\{"apiVersion": "v1", "kind": "List", "metadata": \{"resourceVersion": "(\d+)"\}'
)
#: The generation of a file that does not exist.
ABSENT = -1


def load_snapshot(path: Path) -> InMemoryCluster:
    """An in-memory cluster holding the objects of ``path``; an empty one if it does not exist."""
    return load_into(InMemoryCluster(), path)


def load_into(cluster: InMemoryCluster, path: Path) -> InMemoryCluster:
    """``cluster`` with the objects of ``path`` added (none when it does not exist);
    :class:`SnapshotError` naming the file (and the place) when it is no snapshot."""
    if not path.exists():
        return cluster
    try:
        text = path.read_text(encoding="utf-8")
        documents = _documents(text)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise SnapshotError(f"{path}: cannot read the snapshot: {reason}") from error
    except (UnicodeDecodeError, yaml.YAMLError, ValueError, RecursionError) as error:
        raise SnapshotError(f"{path}: cannot read the snapshot: {_reason(error)}") from error
    try:
        objects = list(_objects(documents))
        cluster.load(objects, owned=True)
    except ValueError as error:
        raise SnapshotError(f"{path}: not a snapshot of Kubernetes objects: {error}") from error
    except (KeyError, TypeError, AttributeError, IndexError) as error:  # a shape not checked
        reason = f"an object is malformed ({type(error).__name__}: {_one_line(str(error))})"
        raise SnapshotError(f"{path}: not a snapshot of Kubernetes objects: {reason}") from error
    except ReconcilerError as error:  # e.g. a custom resource whose CRD is not in the snapshot
        raise SnapshotError(f"{path}: {error}") from error
    cluster.writes = 0
    if isinstance(cluster, SnapshotFileCluster):
        cluster.generation = generation_of(text)
    return cluster


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200]


def _reason(error: BaseException) -> str:
    """Why a snapshot's text could not be read, on one line: a YAML error as its problem and
    place (``line 2, column 1``), never the parser's ``<unicode string>``."""
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        what = " ".join(p for p in (error.context, error.problem) if p) or "not YAML"
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        return _one_line(what) + where
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} (line {error.lineno}, column {error.colno})"
    if isinstance(error, RecursionError):
        return "nested too deeply"
    return _one_line(str(error)) or type(error).__name__


def save_snapshot(cluster: InMemoryCluster, path: Path, generation: int = 1) -> None:
    """Write every object of ``cluster`` to ``path``: a ``v1`` ``List`` in JSON, of
    ``generation``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    items = ",".join(cluster.snapshot_parts(_dump))
    head = _HEAD.format(generation)
    path.write_text(f"{head}{items}{_TAIL}" if items else f"{head}]}}\n", encoding="utf-8")


def generation_of(text: str) -> int:
    """The generation a saved snapshot's text starts with (0: none, as kubectl writes it)."""
    found = _GENERATION.match(text)
    return int(found.group(1)) if found else 0


def read_generation(path: Path) -> int:
    """The generation of the file at ``path`` (its head only), :data:`ABSENT` if none."""
    try:
        with path.open("rb") as file:
            head = file.read(len(_HEAD) + 24)
    except FileNotFoundError:
        return ABSENT
    return generation_of(head.decode("utf-8", errors="replace"))


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock of ``path``'s snapshot across processes and threads: the lock of its
    folder (the snapshot itself is replaced at each save, so it cannot hold the lock, and a lock
    file would be one more file in the user's folder). Saves of one folder's snapshots take
    turns; a process's workers take turns on the interpreter's lock while they encode anyway."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # releases the lock


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
            raise ValueError(f"a document of the snapshot is {_kind_of(document)}, not a mapping")
        if document.get("kind") == "List" or str(document.get("kind", "")).endswith("List"):
            items = document.get("items") or []
            if not isinstance(items, list):
                raise ValueError("the items of a snapshot list are not a list")
            for item in items:
                if item is not None:
                    yield _checked(item)
        else:
            yield _checked(document)


def _checked(item: object) -> Mapping[str, Any]:
    """``item`` when it has the shape of a Kubernetes object (string ``apiVersion`` and
    ``kind``, a ``metadata`` mapping with a string ``name``); a ValueError naming the object
    and the field otherwise."""
    if not isinstance(item, Mapping):
        raise ValueError(f"an item of a snapshot list is not an object but {_kind_of(item)}")
    kind, version = item.get("kind"), item.get("apiVersion")
    if not isinstance(kind, str) or not kind:
        raise ValueError("an object has no string kind")
    if not isinstance(version, str) or not version:
        raise ValueError(f"a {kind} has no string apiVersion")
    metadata = item.get("metadata")
    if not isinstance(metadata, Mapping):
        raise ValueError(f"a {kind}'s metadata is {_kind_of(metadata)}, not a mapping")
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"a {kind} has no string metadata.name")
    for field in ("namespace",):
        if field in metadata and not isinstance(metadata[field], str | None):
            raise ValueError(f"{kind} {name}: metadata.{field} is {_kind_of(metadata[field])}")
    for field in ("labels", "annotations"):
        if metadata.get(field) is not None and not isinstance(metadata[field], Mapping):
            raise ValueError(f"{kind} {name}: metadata.{field} is {_kind_of(metadata[field])}")
    return item


def check_runtime_of(cluster: InMemoryCluster, path: Path, runtime: str) -> None:
    """Refuse (:class:`SnapshotError`) the snapshot ``path`` for ``runtime`` when its inventories
    name only other runtimes: it records another runtime's cluster (a runtime is one cluster,
    and a module's inventory has one name per cluster), so planning against it would take that
    runtime's modules for this one's, and a sync would write into its recording."""
    inventories = cluster.list_objects("v1", "ConfigMap", labels={LABEL_INVENTORY: "true"})
    owners = {
        ((i.get("metadata") or {}).get("labels") or {}).get(LABEL_RUNTIME) for i in inventories
    }
    named = sorted(str(owner) for owner in owners if owner)
    if not named or runtime in named:
        return
    raise SnapshotError(
        f"{path}: a snapshot of runtime {', '.join(named)} (its inventories name it), not of "
        f"{runtime}: give {runtime}'s own file, or the folder of one <runtime>.yaml each"
    )


def _kind_of(value: object) -> str:
    """``a number``, ``a string``, ``a list``, ``null``: what a value is, not what it says."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else f"a {type(value).__name__}"


class SnapshotFileCluster(InMemoryCluster):
    """An in-memory cluster whose writes are saved to its snapshot file at each :meth:`flush`
    (the engine flushes after every step, before it records the step's end). The file is
    replaced whole (written beside it, then renamed), so a process that dies leaves it as it
    was at the last flush: an earlier state of the cluster, never a torn one, and never behind
    what the state store says was done. A save happens under :func:`file_lock` and only while
    the file is still at the generation this cluster read or last saved (see the module
    docstring)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.identity = ClusterIdentity.snapshot(str(path.resolve()))
        self.user = "(a snapshot: no access control)"
        #: The generation of the file this cluster read or last saved (:data:`ABSENT`: none).
        self.generation = ABSENT
        load_into(self, path)  # read once, straight into this cluster
        self._saved = self.writes

    def flush(self, guard: Callable[[], None] | None = None) -> None:
        """Save the file if anything changed since the last save: under the file's lock,
        ``guard`` first (it raises to refuse: a daemon replica's fence), and only while the file
        is still at :attr:`generation` (:class:`ConflictError` if another process saved it)."""
        if self.writes == self._saved:
            return
        with file_lock(self.path):
            if guard is not None:
                guard()
            found = read_generation(self.path)
            if found != self.generation:
                raise ConflictError(
                    f"{self.path}: not saved: another process saved the snapshot since this "
                    f"one read it (generation {found}, read {self.generation})"
                )
            generation = max(found, 0) + 1
            temporary = self.path.with_name(self.path.name + ".tmp")
            try:
                save_snapshot(self, temporary, generation)
                temporary.replace(self.path)
            except OSError as error:
                raise AccessError(
                    f"{self.path}: the snapshot cannot be saved: {error.strerror or error} (make "
                    "its folder writable, or give --snapshot another one); this step's writes "
                    "were not kept"
                ) from None
        self.generation, self._saved = generation, self.writes
