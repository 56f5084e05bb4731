"""The deletions the daemon asked for itself, so that a watch does not take them for drift.

Every delete a run sends (a prune, a removal, the replacement of an object whose field cannot
change) goes through :meth:`OwnDeletes.around` (the runs' fenced cluster calls it), which notes
the object before the request is sent: the watch's event may come before the answer. The note
is taken back when the server answers that there was nothing to delete, used up by the object's
deleted event (:meth:`OwnDeletes.ours`), and dropped when the object is created again. Deleting
a Namespace deletes what it holds, and deleting a CRD its custom resources: those notes cover
every object in the Namespace, or of the CRD's group, until one is created there again.
Caller: :class:`reconciler.daemon.watches.Watches`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from reconciler.core.objects import Body, ObjectRef

#: What a note covers: ("object", group, kind, namespace, name), ("namespace", name) or
#: ("group", group), on one cluster (where).
_Note = tuple[str, ...]


class OwnDeletes:
    """See the module docstring. Thread-safe: runs note, watch threads read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._notes: set[tuple[str, _Note]] = set()

    def around(self, where: str) -> Callable[[ObjectRef, Callable[[], bool]], bool]:
        """How the cluster ``where`` names deletes: ``delete`` (which says whether there was
        something to delete) called with ``ref`` noted as ours first."""

        def delete(ref: ObjectRef, ask: Callable[[], bool]) -> bool:
            notes = {(where, note) for note in _notes_of(ref)}
            with self._lock:
                self._notes |= notes
            deleted = ask()  # a failure keeps the note: the request may have been done
            if not deleted:
                with self._lock:
                    self._notes -= notes
            return deleted

        return delete

    def ours(self, where: str, body: Body) -> bool:
        """Whether the deletion of ``body`` (on ``where``) is one we asked for, or follows
        from one (its Namespace, its CRD); the object's own note is used up."""
        ref = ObjectRef.of(body)
        own = (where, _object(ref))
        with self._lock:
            if own in self._notes:
                self._notes.discard(own)
                return True
            return (where, ("namespace", ref.namespace)) in self._notes or (
                where,
                ("group", ref.group),
            ) in self._notes

    def created(self, where: str, body: Body) -> None:
        """``body`` was created (on ``where``): a deletion of it from now on is news, and so
        is one of anything in its Namespace or group."""
        ref = ObjectRef.of(body)
        with self._lock:
            self._notes -= {
                (where, _object(ref)),
                (where, ("namespace", ref.namespace)),
                (where, ("group", ref.group)),
            }


def _object(ref: ObjectRef) -> _Note:
    return ("object", ref.group, ref.kind, ref.namespace, ref.name)


def _notes_of(ref: ObjectRef) -> set[_Note]:
    """The notes the deletion of ``ref`` makes: itself, and what it cascades to."""
    notes = {_object(ref)}
    if ref.kind == "Namespace" and not ref.group:
        notes.add(("namespace", ref.name))
    if ref.kind == "CustomResourceDefinition" and ref.group == "apiextensions.k8s.io":
        notes.add(("group", ref.name.partition(".")[2]))
    return notes
