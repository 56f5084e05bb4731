"""The one exception hierarchy of the project.

Every error we raise derives from :class:`ReconcilerError` and says whether trying again can
help::

    ReconcilerError
     +-- PermanentError            retrying will not help; a person must change something
     |    +-- ConfigError           the config repo is invalid (carries every diagnostic)
     |    +-- OverBudgetError       reading a file or commit took too long (becomes a diagnostic)
     |    +-- SourceError           the config repo cannot be read (missing dir, permissions)
     |    |    +-- UnreadableError  one file of it cannot be read
     |    |    +-- SnapshotError    a recorded cluster (--snapshot) is missing or unreadable
     |    +-- RenderError           a template (chart, overlay) cannot be rendered or fetched
     |    +-- NotFoundError         a named thing (runtime, module, object) does not exist
     |    +-- InvalidObjectError    the API server refused an object as invalid (422)
     |    |    +-- ImmutableFieldError  a change of a field the server never changes (422)
     |    +-- UnservedKindError     an object's kind is neither served nor defined by a CRD (L14)
     |    +-- ForbiddenError        the credentials may not do this (401, 403)
     |    +-- AccessError           no way to reach a cluster (no kubeconfig, bad context)
     |    +-- HeldByBrakeError      the deletion brake holds a sync (S5): allow it explicitly
     |    +-- InternalError         a bug: an exception not raised on purpose, kept as ours
     +-- TransientError            may succeed later; carries ``retry_after`` seconds
          +-- ConflictError         a concurrent change or a field owned by another manager (409)
          |    +-- ExpiredError     a watch's resourceVersion is too old (410 Gone): list again
          +-- UnknownKindError      the API server does not serve this kind (yet: a new CRD)
          +-- ThrottledError        too many requests (429); ``retry_after`` from the server
          +-- ServerError           the API server failed or could not be reached (5xx, network)
          +-- StoreError            the state store's database is unreachable or failed (PostgreSQL)
          +-- FencedError           this replica may not write any more (its lease lapsed)
               +-- LostOwnershipError  the store refused a write: another member holds it now

Library exceptions are translated into these once, at the adapter that calls the library.
Messages never contain secret values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Finding(Protocol):
    """A located problem of the config repo, as an error carries it: what this module needs of
    :class:`reconciler.core.diagnostics.Diagnostic`, so that the error hierarchy, the bottom of
    every layer, imports nothing of the product."""

    def format(self) -> str:
        """The compiler-style one-line form: ``path:line:col: RULE message (pointer)``."""


class ReconcilerError(Exception):
    """Root of every error the project raises on purpose."""


class PermanentError(ReconcilerError):
    """An error that retrying cannot fix."""


class HeldByBrakeError(PermanentError):
    """The deletion brake (S5) holds a sync: more deletions than allowed, nothing done."""


class InternalError(PermanentError):
    """A bug: an exception we did not raise on purpose, kept (with ``cause``, its type) where
    our errors are kept, e.g. the daemon's last error of a runtime; its message reads
    ``internal error: TYPE: message`` and may name the place."""

    def __init__(self, message: str, cause: type[BaseException]) -> None:
        super().__init__(message)
        self.cause = cause

    @classmethod
    def of(cls, error: BaseException) -> InternalError:
        """``error`` as an internal error: ``internal error: TYPE: message``."""
        return cls(f"internal error: {type(error).__name__}: {error}", type(error))


class TransientError(ReconcilerError):
    """An error that may go away; try again after ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: float = 5.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ConfigError(PermanentError):
    """The config repo is invalid; ``diagnostics`` lists every reason, sorted."""

    def __init__(self, diagnostics: Sequence[Finding], side: str = "") -> None:
        where = f" at {side}" if side else ""
        super().__init__(f"the config repo{where} has {len(diagnostics)} error(s)")
        self.diagnostics = tuple(diagnostics)
        self.side = side


class OverBudgetError(PermanentError):
    """Reading and checking a file (``scope`` "file") or a whole commit ("commit") took longer
    than its time budget. Raised inside the reader and the validator, which turn it into one C6
    diagnostic at the place reached (:func:`reconciler.config.budget.budget_diagnostic`); it
    never reaches a user as it is."""

    def __init__(self, scope: str, seconds: float) -> None:
        what = "this file" if scope == "file" else "the commit (stopped here)"
        super().__init__(f"reading and checking {what} took more than its {seconds:g} s budget")
        self.scope = scope
        self.seconds = seconds
        #: The C6 diagnostic of the first place it was met at
        #: (:func:`reconciler.config.budget.budget_diagnostic` makes it).
        self.diagnostic: Finding | None = None


class SourceError(PermanentError):
    """The config repo (or a source it names) cannot be read at all."""


class UnreadableError(SourceError):
    """A file exists but cannot be read (permissions, I/O)."""


class SnapshotError(SourceError):
    """A snapshot standing in for a cluster (``--snapshot``) cannot be read, or is missing."""


class RenderError(PermanentError):
    """A templated module version (a chart, an overlay) cannot be rendered with the values it
    was given: a template fails, the engine is missing, the output is not Kubernetes objects.
    ``path`` is the file or folder to blame, for a located diagnostic."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class NotFoundError(PermanentError):
    """A runtime, module or other named item does not exist."""


class InvalidObjectError(PermanentError):
    """The API server refused an object as invalid."""


class ImmutableFieldError(InvalidObjectError):
    """The API server refused a change of a field it never changes (422 ``field is
    immutable``, a Job's ``spec.template``): the object must be replaced to change it."""


class UnservedKindError(PermanentError):
    """An object's apiVersion and kind are not served by the cluster, and no CRD of its module
    or of a module it depends on defines them: nothing of the module version is written."""


class ForbiddenError(PermanentError):
    """The cluster credentials do not allow the request."""


class AccessError(PermanentError):
    """A cluster cannot be reached at all: no kubeconfig, unknown context, missing Secret."""


class ConflictError(TransientError):
    """The object changed underneath, or another field manager owns a field."""


class ExpiredError(ConflictError):
    """A watch asked for events after a resourceVersion the server no longer keeps (410 Gone):
    list the kind again and watch from the list's resourceVersion."""


class UnknownKindError(TransientError):
    """The kind is not served (yet): its CRD is missing or not Established."""


class ThrottledError(TransientError):
    """The API server asked us to slow down."""


class ServerError(TransientError):
    """The API server failed, timed out or could not be reached."""


class FencedError(TransientError):
    """This daemon replica may not write any more: its heartbeat lapsed, or its runtime moved
    to another member (issue 14's fencing)."""


class LostOwnershipError(FencedError):
    """The state store refused a write in the statement that would have made it: the operation
    was claimed or written by another owner since this one last wrote it, or this member's
    epoch is no longer current (another member fenced it and took its runtimes over). Nothing
    was written; the work stops here."""


class StoreError(TransientError):
    """The state store's database server could not be reached, or a transaction failed in a way
    that a new try may fix (connection lost, deadlock, serialisation failure)."""
