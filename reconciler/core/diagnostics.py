"""Diagnostics: one problem found in the config repo, with its place and rule.

Used by the YAML reader, the schema checker and the cross-file validator; printed by the CLI as
``path:line:col: <rule> <message> (<json-pointer>)`` and serialised to JSON. Pure data; the
text of a diagnostic is masked where it is made (:func:`reconciler.core.redaction.mask`, rule S4),
so
no message, pointer or path can carry a token, whatever check made it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from reconciler.core.redaction import mask

Pointer = tuple[str | int, ...]


def format_pointer(pointer: Pointer) -> str:
    """Render a JSON pointer (RFC 6901) from its path segments; the root is ``""``."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in pointer)


@dataclass(frozen=True, slots=True, order=True)
class Diagnostic:
    """One error in the config repo. Ordered by file, line, column, rule, message."""

    path: str
    line: int
    column: int
    rule: str
    message: str
    pointer: str = ""

    def __post_init__(self) -> None:
        for name in ("path", "message", "pointer"):
            text = getattr(self, name)
            masked = mask(text)
            if masked != text:
                object.__setattr__(self, name, masked)

    def format(self) -> str:
        """The compiler-style one-line form: ``path:line:col: RULE message (pointer)``."""
        where = f" ({self.pointer})" if self.pointer else ""
        return f"{self.path}:{self.line}:{self.column}: {self.rule} {self.message}{where}"

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict with stable keys."""
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "rule": self.rule,
            "message": self.message,
            "pointer": self.pointer,
        }


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Sorted, without exact duplicates."""
    return sorted(set(diagnostics))


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` when a candidate is close to ``word``, else ``""``."""
    import difflib  # only when a name is unknown (startup time of every command)

    matches = difflib.get_close_matches(word, sorted(set(candidates)), n=1, cutoff=0.6)
    return f"; did you mean '{matches[0]}'?" if matches else ""
