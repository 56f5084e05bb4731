"""Finds credentials written into the config repo (rule C6, safety rule S4) (pure).

A config repo is read by many people and copied into many places; kubeconfigs, tokens and
Secret data belong in the cluster (a Secret in the daemon's namespace) or in the daemon's
``--kubeconfig-dir``, never in git. Flagged, wherever they appear in any document:

- a ``Secret`` with non-empty ``data`` or ``stringData``;
- a kubeconfig (``kind: Config`` with ``users``) or a field named like a kubeconfig credential
  (``client-key-data``, ``token``, ``id-token``, ``refresh-token``, ``password``) holding a
  non-empty string;
- a PEM private key block in any string.

Messages name the place, never the value. Callers: the validator.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reconciler.diagnostics import Diagnostic, Pointer
from reconciler.yamlsafe import Document

CREDENTIAL_KEYS = frozenset(
    {"client-key-data", "token", "id-token", "refresh-token", "password", "auth-provider-token"}
)
_PEM_MARKER = "PRIVATE KEY-----"
_ADVICE = "credentials never go in the config repo; create them in the cluster and refer to them"


def find_inline_credentials(document: Document) -> list[Diagnostic]:
    """One C6 diagnostic per credential found in ``document``."""
    return [
        document.diagnostic("C6", f"{what}: {_ADVICE}", pointer)
        for pointer, what in _findings(document.data)
    ]


def _findings(data: Any) -> Iterator[tuple[Pointer, str]]:
    if not isinstance(data, dict):
        yield from _walk(data, ())
        return
    if data.get("kind") == "Config" and "users" in data:
        yield (), "a kubeconfig with users"
        return
    if str(data.get("kind", "")).endswith("List") and isinstance(data.get("items"), list):
        for index, item in enumerate(data["items"]):
            for pointer, what in _findings(item):
                yield ("items", index, *pointer), what
        return
    secret_fields = ("data", "stringData") if data.get("kind") == "Secret" else ()
    for key, child in data.items():
        if key in secret_fields and child:
            yield (key,), f"Secret with inline {key}"
        else:
            yield from _walk({key: child}, ())


def _has_value(value: Any) -> bool:
    """A credential value: a non-empty string or a number (``password: 84736251``)."""
    if isinstance(value, str):
        return bool(value.strip())
    return isinstance(value, int | float) and not isinstance(value, bool)


def _walk(value: Any, pointer: Pointer) -> Iterator[tuple[Pointer, str]]:
    if isinstance(value, dict):
        for key, child in value.items():
            if key in CREDENTIAL_KEYS and _has_value(child):
                yield (*pointer, key), f"inline credential '{key}'"
            else:
                yield from _walk(child, (*pointer, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _walk(child, (*pointer, index))
    elif isinstance(value, str) and _PEM_MARKER in value:
        yield pointer, "a PEM private key"
