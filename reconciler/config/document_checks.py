"""The checks of single documents in one validation pass (pure).

A file's one document against its schema (C1), scanned for inline credentials (C6); a manifest
object's structure; ``metadata.name`` against the file or folder name (C4); each within its file's
time budget (C6). What they found is remembered per document by the pass's memo
(:class:`~reconciler.config.memo.CheckMemo`), for validations that share documents (the two
revisions of a review). :class:`DocumentChecks` also holds what the pass has found so far.
Callers: ``config.validate`` and its module and runtime checks (``config.module_checks``,
``config.runtime_checks``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from reconciler.config.budget import TimeBudget, budget_diagnostic
from reconciler.config.credentials import find_inline_credentials
from reconciler.config.manifests import object_problems
from reconciler.config.memo import CheckMemo
from reconciler.config.raw import RawFile
from reconciler.config.schema import SchemaChecker
from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic
from reconciler.errors import OverBudgetError


@dataclass(slots=True)
class DocumentChecks:
    """One validation pass's checks of single documents, and what the pass found so far: its
    diagnostics and warnings, and the documents values are written in."""

    checker: SchemaChecker
    diagnostics: list[Diagnostic]
    budget: TimeBudget | None = None
    memo: CheckMemo = field(default_factory=CheckMemo)
    warnings: list[Diagnostic] = field(default_factory=list)
    #: Where values are written (values.yaml, valuesFrom files), for C9 values errors.
    value_documents: dict[str, Document] = field(default_factory=dict)

    def timed(self, document: Document, check: Callable[[], bool]) -> bool:
        """``check()`` of ``document`` within its file's time budget; past it, what the check
        found is dropped for one C6 diagnostic at the document, and the document fails."""
        if self.budget is None:
            return check()
        try:
            with self.budget.file(document.path):
                return check()
        except OverBudgetError as over:
            place = document.position(())
            diagnostic = budget_diagnostic(over, document.path, place.line, place.column)
            if over.scope != "file":
                raise
            self.diagnostics.append(diagnostic)
            return False

    # -- single documents ------------------------------------------------------------------

    def single(self, file: RawFile, kind: str) -> Document | None:
        """The one document of ``file`` if it passes its schema, else ``None`` (reported)."""
        if file.broken:
            return None
        if not file.documents:
            self.diagnostics.append(file.at("C1", f"file is empty; expected one {kind} document"))
            return None
        if len(file.documents) > 1:
            extra = file.documents[1]
            message = f"expected one {kind} document, found {len(file.documents)}"
            self.diagnostics.append(extra.diagnostic("C1", message, ()))
            return None
        document = file.documents[0]
        known = self.memo.known(kind, document)  # the other side's: no time to count
        if known is not None:
            self.diagnostics.extend(known)
            return None if known else document
        return document if self.timed(document, lambda: self.schema_ok(kind, document)) else None

    def schema_ok(self, kind: str, document: Document) -> bool:
        found = self.memo.found(kind, document, lambda: self.schema_problems(kind, document))
        self.diagnostics.extend(found)
        return not found

    def schema_problems(self, kind: str, document: Document) -> list[Diagnostic]:
        found = self.checker.check(kind, document, self.budget)
        credentials = find_inline_credentials(document, self.budget)
        if credentials:  # a credential explains its own unknown-field error
            places = {d.pointer for d in credentials}
            found = [d for d in found if d.pointer not in places]
        return found + credentials

    def name_matches(self, document: Document, expected: str, what: str) -> bool:
        name = document.data["metadata"]["name"]
        if name == expected:
            return True
        message = f"metadata.name '{name}' must equal the {what} '{expected}'"
        self.diagnostics.append(document.diagnostic("C4", message, ("metadata", "name")))
        return False

    def kubernetes_object(self, document: Document) -> bool:
        return self.timed(document, lambda: self.object_ok(document))

    def object_ok(self, document: Document) -> bool:
        problems = self.memo.found("object", document, lambda: self.object_problems(document))
        self.diagnostics.extend(problems)
        return not problems

    def object_problems(self, document: Document) -> list[Diagnostic]:
        problems = list(object_problems(document))
        problems.extend(find_inline_credentials(document, self.budget))
        return problems
