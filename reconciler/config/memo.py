"""What validating a config repo once leaves for validating another revision of it (pure).

A review validates two revisions whose files are mostly the same blobs, parsed once and shared
as the same :class:`~reconciler.config.yamlsafe.Document` objects. What depends on nothing but
such a document is kept here by document and found again for the other revision: the findings of
the single-document checks (schema, inline credentials, a manifest object's structure) and the
typed runtime built from a Runtime document. Callers: the validator (``config.validate``), the
review (``review.fleet``), which shares one memo between the revisions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from reconciler.config.builders import runtime_from
from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic
from reconciler.core.model import Runtime


@dataclass(slots=True)
class CheckMemo:
    """What the checks of single documents found (schema and inline credentials; a manifest
    object's structure), kept by document: a document that two reads share (the two revisions
    of a review, parsed once per blob) is checked once. These checks look at nothing but the
    document, so their findings are the same in both reads."""

    _found: dict[tuple[str, int], tuple[Document, tuple[Diagnostic, ...]]] = field(
        default_factory=dict
    )
    #: How many checks ran (the others were answered from memory).
    checked: int = 0
    #: How many typed runtimes were built (the others were found again).
    built: int = 0
    _runtimes: dict[int, tuple[Document, str, Runtime]] = field(default_factory=dict)

    def found(
        self, what: str, document: Document, check: Callable[[], list[Diagnostic]]
    ) -> tuple[Diagnostic, ...]:
        """What ``check()`` finds in ``document`` (checked as ``what``), from memory if known."""
        key = (what, id(document))
        known = self._found.get(key)
        if known is not None and known[0] is document:
            return known[1]
        found = tuple(check())
        self.checked += 1
        self._found[key] = (document, found)  # the document kept: its id stays its own
        return found

    def runtime(self, document: Document, source: str) -> Runtime:
        """The typed runtime of the valid Runtime ``document`` read from ``source``: one object
        for a document two reads share (it is built from nothing else)."""
        known = self._runtimes.get(id(document))
        if known is not None and known[0] is document and known[1] == source:
            return known[2]
        runtime = runtime_from(document.data, source)
        self.built += 1
        self._runtimes[id(document)] = (document, source, runtime)
        return runtime
