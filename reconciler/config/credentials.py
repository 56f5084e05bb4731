"""Finds credentials written into the config repo (rule C6, safety rule S4) (pure).

A config repo is read by many people and copied into many places; kubeconfigs, tokens and
Secret data belong in the cluster (a Secret in the daemon's namespace) or in the daemon's
``--kubeconfig-dir``, never in git. Flagged, wherever they appear in any document:

- a ``Secret`` with non-empty ``data`` or ``stringData``;
- a kubeconfig: a document (``kind: Config`` with ``users``) or a string holding one (a
  ConfigMap's data);
- a field named like a credential (:mod:`reconciler.config.credential_names`: ``password``,
  ``dbPassword``, ``aws_secret_access_key``, ``apiKey``, ``client-key-data``, ...) holding a
  string set literally (not empty, not a placeholder such as ``${VAR}``) or a number;
- a container's environment variable named like a secret (``*PASSWORD*``, ``*TOKEN*``,
  ``*SECRET*``, ``*API_KEY*``, ``DB_PASS``, ...) with a literal ``value`` (not ``valueFrom``);
- a ``user:password`` value of a field or annotation named like ``*auth*``;
- the item after a ``--password`` flag in a list (``args: ["--password", "x"]``);
- in any key or string: every shape :mod:`reconciler.core.redaction` knows (cloud and code-host
  tokens, JWTs, ``Bearer``/``Basic`` credentials, a password in a URL) and, in strings, what
  :mod:`reconciler.config.credential_text` finds (PEM private keys, kubeconfigs, htpasswd
  lines, ``NAME=value`` and the like in embedded files and command lines, base64 of these).

With a time budget the scan looks at it every 1,024 strings and before each window of a long
string; past it, :class:`~reconciler.errors.OverBudgetError` carries one C6 line at the value
reached ("the credential scan stopped here: ...").
Messages name the place and what was found, never the value. Callers: the validator.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from reconciler.config.budget import TimeBudget, budget_diagnostic
from reconciler.config.credential_names import is_credential_name, is_reference
from reconciler.config.credential_text import text_kind
from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic, Pointer, format_pointer
from reconciler.core.redaction import token_kind
from reconciler.errors import OverBudgetError

#: Parts of an environment variable's name (upper case, without ``-`` and ``_``) that say its
#: value is a secret ...
_SECRET_ENV_PARTS = ("PASSWORD", "PASSWD", "TOKEN", "SECRET", "APIKEY", "PRIVATEKEY")
#: ... unless its last word says the value only points at one or describes it
#: (``DB_PASSWORD_FILE``, ``TOKEN_TTL``).
_REFERENCE_SUFFIXES = frozenset(
    {"FILE", "PATH", "DIR", "NAME", "REF", "URL", "ENDPOINT", "TYPE", "TTL", "AUDIENCE", "ISSUER"}
)
#: ``user:password`` (not ``host:443``, not ``scheme://...``).
_USER_PASSWORD = re.compile(r"^[^\s:/@]++:(?!\d++$)[^\s/]\S*+$")
#: Keys whose strings are prose (a schema's descriptions), not settings.
_PROSE_KEYS = frozenset({"description"})
_LITERAL_ENV_FOUND = (
    "an environment variable named like a secret with a literal value (use valueFrom)"
)
_SCAN = "the credential scan"
ADVICE = "credentials never go in the config repo; create them in the cluster and refer to them"
#: The scan looks at its time budget every this many keys and strings (and before each window
#: of a long string).
_CHECK_EVERY = 1024


def find_inline_credentials(
    document: Document, budget: TimeBudget | None = None
) -> list[Diagnostic]:
    """One C6 diagnostic per credential found in ``document``. With a ``budget``, a scan past
    the file's time raises :class:`~reconciler.errors.OverBudgetError`, located at the value
    the scan had reached."""
    scan = _Scan(budget)
    try:
        found = scan.findings(document.data)
    except OverBudgetError as over:
        place = document.position(scan.at)
        where = format_pointer(scan.at)
        budget_diagnostic(over, document.path, place.line, place.column, doing=_SCAN, pointer=where)
        raise
    return [
        document.diagnostic("C6", f"{what}: {ADVICE}", pointer, key=key)
        for pointer, what, key in found
    ]


#: (where, what was found, whether the key itself is the finding)
_Finding = tuple[Pointer, str, bool]


@dataclass(slots=True)
class _Scan:
    """One scan of a document: its time budget and the place reached."""

    budget: TimeBudget | None
    at: Pointer = ()
    seen: int = 0

    def findings(self, data: Any) -> list[_Finding]:
        """Every credential of a document's data, in the order met (a list filled as the walk
        goes: generators nested as deep as the document cost more than the checks)."""
        found: list[_Finding] = []
        self.document(data, (), found)
        return found

    def document(self, data: Any, pointer: Pointer, found: list[_Finding]) -> None:
        if not isinstance(data, dict):
            self.walk(data, pointer, found)
            return
        if data.get("kind") == "Config" and "users" in data:
            found.append((pointer, "a kubeconfig with users", False))
            return
        if str(data.get("kind", "")).endswith("List") and isinstance(data.get("items"), list):
            for index, item in enumerate(data["items"]):
                self.document(item, (*pointer, "items", index), found)
            return
        secret_fields = ("data", "stringData") if data.get("kind") == "Secret" else ()
        self.entries(data, pointer, found, secret_fields=secret_fields)

    def walk(self, value: Any, pointer: Pointer, found: list[_Finding]) -> None:
        if isinstance(value, str):
            what = self.string(value, pointer)
            if what is not None:
                found.append((pointer, what, False))
        elif isinstance(value, dict):
            self.entries(
                value, pointer, found, secret_env="value" in value and _is_secret_env(value)
            )
        elif isinstance(value, list):
            self.sequence(value, pointer, found)

    def entries(
        self,
        value: dict[Any, Any],
        pointer: Pointer,
        found: list[_Finding],
        *,
        secret_env: bool = False,
        secret_fields: tuple[str, ...] = (),
    ) -> None:
        """The keys and values of a mapping: a variable named like a secret set literally
        (``secret_env``), or a document's top level (``secret_fields``: a Secret's data). The
        hot loop of the scan: a pointer is built only for a finding, a long string or a child
        collection."""
        if secret_env:
            found.append(((*pointer, "value"), _LITERAL_ENV_FOUND, False))
        for key, child in value.items():
            if key in secret_fields and child:
                found.append(((*pointer, key), f"Secret with inline {key}", False))
                continue
            what, credential, auth = _key_class(key if key.__class__ is str else str(key))
            if what is not None:
                found.append(((*pointer, key), f"{what} as a key", True))
            elif credential and _has_value(child):
                found.append(((*pointer, key), f"inline credential '{key}'", False))
            elif isinstance(child, str):
                if auth and _USER_PASSWORD.match(child.strip()):
                    found.append(((*pointer, key), "a user:password credential", False))
                    continue
                if secret_env and key == "value":
                    continue
                what = self.short_string(child, pointer, key)
                if what is not None:
                    found.append(((*pointer, key), what, False))
            elif isinstance(child, dict):
                secret = "value" in child and _is_secret_env(child)
                self.entries(child, (*pointer, key), found, secret_env=secret)
            elif isinstance(child, list):
                self.sequence(child, (*pointer, key), found)

    def short_string(self, text: str, pointer: Pointer, key: Any) -> str | None:
        """What the string of ``key`` holds: a short one from memory, without a pointer
        unless the budget is looked at."""
        prose = key in _PROSE_KEYS
        if len(text) > _SHORT:
            return self.string(text, (*pointer, key), prose=prose)
        self.seen += 1
        if self.seen % _CHECK_EVERY == 0:
            self.check_at((*pointer, key))
        return _short_text_kind(text, prose)

    def sequence(self, value: list[Any], pointer: Pointer, found: list[_Finding]) -> None:
        """Items, and a flag's value in the next item (``["--password", "x"]``)."""
        flag = None
        for index, child in enumerate(value):
            if flag is not None and isinstance(child, str) and _is_flag_value(child):
                found.append(((*pointer, index), f"inline credential after '{flag}'", False))
            else:
                self.walk(child, (*pointer, index), found)
            flag = child if isinstance(child, str) and _is_credential_flag(child) else None

    def string(self, text: str, pointer: Pointer, *, prose: bool = False) -> str | None:
        """What ``text`` at ``pointer`` holds, within the time budget."""
        self.seen += 1
        if len(text) <= _SHORT:
            if self.seen % _CHECK_EVERY == 0:
                self.check_at(pointer)
            return _short_text_kind(text, prose)
        self.at = pointer
        return text_kind(text, prose=prose, check=self.check)

    def check_at(self, pointer: Pointer) -> None:
        self.at = pointer
        self.check()

    def check(self) -> None:
        """Raise :class:`OverBudgetError` when the file's time is up."""
        if self.budget is not None:
            self.budget.check()


def _has_value(value: Any) -> bool:
    """A credential value: a string set literally (not empty, not a reference such as
    ``${VAR}``) or a number (``password: 84736251``)."""
    if isinstance(value, str):
        return not is_reference(value)
    return isinstance(value, int | float) and not isinstance(value, bool)


@functools.lru_cache(maxsize=1 << 16)
def _key_class(key: str) -> tuple[str | None, bool, bool]:
    """A key's secret shape, whether it names a credential, whether it names auth (keys repeat
    across a repo's documents: each is looked at once)."""
    return token_kind(key), is_credential_name(key), _is_auth_key(key)


#: Strings up to this length are remembered (names, labels, versions repeat across a repo).
_SHORT = 128


@functools.lru_cache(maxsize=1 << 16)
def _short_text_kind(text: str, prose: bool) -> str | None:
    return text_kind(text, prose=prose)


def _is_auth_key(key: Any) -> bool:
    """``basicAuth``, ``auth``, ``nginx.ingress.kubernetes.io/auth-...``: the name after the
    last ``/`` mentions auth."""
    return "auth" in str(key).rsplit("/", 1)[-1].lower()


def _is_credential_flag(text: str) -> bool:
    """``--password``, ``-token``: a flag whose value is a credential."""
    return text.startswith("-") and len(text) <= _SHORT and is_credential_name(text.lstrip("-"))


def _is_flag_value(text: str) -> bool:
    return not text.startswith("-") and not is_reference(text)


def _is_secret_env(entry: dict[Any, Any]) -> bool:
    """``{name: DB_PASSWORD, value: hunter2}``: a variable named like a secret, set literally."""
    name = entry.get("name")
    if not isinstance(name, str) or not _has_value(entry.get("value")):
        return False
    words = re.split(r"[-_.]", name.upper())
    if words[-1] in _REFERENCE_SUFFIXES:
        return False
    compact = "".join(words)
    return any(part in compact for part in _SECRET_ENV_PARTS) or is_credential_name(name)
