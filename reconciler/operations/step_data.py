"""Each step's own data, kept with its operation in the state store (pure).

A step that does something slow or not to be repeated (creates a DNS record, opens a ticket,
asks an external API for an id) keeps what it needs to know next time: the record's id, the
ticket number. The stage is run again on a retry (O1) and after a crash or a restart (O2), and
the step then finds its data instead of doing the call again, as the Kyma Environment Broker's
steps keep theirs in the operation they return.

Data is a JSON object per step name, checked when it is kept: JSON only (a value that is not
is refused, naming the step), at most :data:`LIMIT` bytes per step, and never a secret (S4, O2:
sensitive data lives only in memory inside one stage): a string with the shape of a token or a
password is refused. Callers: steps (``operation.data.kept_by`` / ``keeping``), the store's
codec.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.core.redaction import token_kind
from reconciler.errors import PermanentError

#: Bytes of one step's data at most (as JSON).
LIMIT = 64 * 1024


@dataclass(frozen=True, slots=True)
class StepData:
    """Step name -> its data as canonical JSON text (frozen, comparable)."""

    kept: tuple[tuple[str, str], ...] = ()

    def of(self, step: str) -> dict[str, Any]:
        """What ``step`` kept (a fresh copy), or an empty mapping."""
        for name, text in self.kept:
            if name == step:
                found: dict[str, Any] = json.loads(text)
                return found
        return {}

    def keeping(self, step: str, data: Mapping[str, Any]) -> StepData:
        """This data with ``data`` as ``step``'s (an empty mapping forgets it); a
        :class:`PermanentError` naming the step when it is not JSON, too large or holds a
        secret."""
        others = tuple((name, text) for name, text in self.kept if name != step)
        if not data:
            return StepData(others)
        return StepData((*others, (step, checked_text(step, data))))

    def to_json(self) -> dict[str, Any]:
        """The stored form: ``{step: data}``."""
        return {name: json.loads(text) for name, text in self.kept}

    @classmethod
    def from_json(cls, document: object) -> StepData:
        """Inverse of :meth:`to_json` (anything else reads as nothing kept)."""
        if not isinstance(document, dict):
            return cls()
        return cls(
            tuple(
                (str(name), json.dumps(value, sort_keys=True, separators=(",", ":")))
                for name, value in document.items()
                if isinstance(value, dict)
            )
        )


def checked_text(step: str, data: Mapping[str, Any]) -> str:
    """``data`` as canonical JSON text, checked (see the module docstring)."""
    try:
        text = json.dumps(dict(data), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise PermanentError(f"step {step}: its data is not JSON: {error}") from None
    if len(text.encode()) > LIMIT:
        raise PermanentError(
            f"step {step}: its data is {len(text.encode())} bytes as JSON, over {LIMIT}: keep "
            "ids and small facts, not documents"
        )
    for path, value in _strings(data, ""):
        kind = token_kind(value)
        if kind is not None:
            raise PermanentError(
                f"step {step}: its data holds {kind} at {path or '.'}: secrets stay in memory "
                "within one stage, never in the stored operation (O2, S4)"
            )
    return text


def _strings(value: object, path: str) -> Iterator[tuple[str, str]]:
    """Every string of a JSON value (keys too), with its dotted path."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield f"{path}.{key}", str(key)
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")
