"""Finds credentials written into the config repo (rule C6, safety rule S4) (pure).

A config repo is read by many people and copied into many places; kubeconfigs, tokens and
Secret data belong in the cluster (a Secret in the daemon's namespace) or in the daemon's
``--kubeconfig-dir``, never in git. Flagged, wherever they appear in any document:

- a ``Secret`` with non-empty ``data`` or ``stringData``;
- a kubeconfig: a document (``kind: Config`` with ``users``) or a string holding one (a
  ConfigMap's data);
- a field named like a credential (``password`` in any case, ``token``, ``apiKey``,
  ``clientSecret``, ``client-key-data``, ``id-token``, ``refresh-token``, ...; ``-`` and ``_``
  ignored) holding a non-empty string or a number;
- a container's environment variable named like a secret (``*PASSWORD*``, ``*TOKEN*``,
  ``*SECRET*``, ``*API_KEY*``, ...) with a literal ``value`` (not ``valueFrom``);
- a ``user:password`` value of a field or annotation named like ``*auth*``, and an htpasswd
  line (``user:$apr1$...``);
- in any key or string: a PEM private key and every shape :mod:`reconciler.core.redaction` knows
  (cloud and code-host tokens, JWTs, ``Bearer``/``Basic`` credentials, a password in a URL).

Messages name the place and what was found, never the value. Callers: the validator.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic, Pointer
from reconciler.core.redaction import token_kind

#: Field names (lower case, without ``-`` and ``_``) whose string value is a credential.
CREDENTIAL_KEYS = frozenset(
    {
        "password",
        "passwd",
        "token",
        "idtoken",
        "refreshtoken",
        "accesstoken",
        "authprovidertoken",
        "clientkeydata",
        "apikey",
        "clientsecret",
        "secretaccesskey",
    }
)
#: Parts of an environment variable's name (upper case, without ``-`` and ``_``) that say its
#: value is a secret ...
_SECRET_ENV_PARTS = ("PASSWORD", "PASSWD", "TOKEN", "SECRET", "APIKEY", "PRIVATEKEY")
#: ... unless its last word says the value only points at one or describes it
#: (``DB_PASSWORD_FILE``, ``TOKEN_TTL``).
_REFERENCE_SUFFIXES = frozenset(
    {"FILE", "PATH", "DIR", "NAME", "REF", "URL", "ENDPOINT", "TYPE", "TTL", "AUDIENCE", "ISSUER"}
)
_PEM_MARKER = "PRIVATE KEY-----"
_KUBECONFIG_KIND = re.compile(r"""(?m)^\s*["']?kind["']?\s*:\s*["']?Config["']?\s*,?\s*$""")
_KUBECONFIG_USERS = re.compile(r"""(?m)^\s*["']?users["']?\s*:""")
_HTPASSWD = re.compile(r"(?m)^[^\s:]+:(?:\$apr1\$|\$2[abxy]?\$\d\d\$|\$[156]\$|\{SHA\})\S+")
#: ``user:password`` (not ``host:443``, not ``scheme://...``).
_USER_PASSWORD = re.compile(r"^[^\s:/@]+:(?!\d+$)[^\s/][^\s]*$")
_LITERAL_ENV_FOUND = (
    "an environment variable named like a secret with a literal value (use valueFrom)"
)
_ADVICE = "credentials never go in the config repo; create them in the cluster and refer to them"


def find_inline_credentials(document: Document) -> list[Diagnostic]:
    """One C6 diagnostic per credential found in ``document``."""
    return [
        document.diagnostic("C6", f"{what}: {_ADVICE}", pointer, key=key)
        for pointer, what, key in _findings(document.data)
    ]


#: (where, what was found, whether the key itself is the finding)
_Finding = tuple[Pointer, str, bool]


def _findings(data: Any) -> Iterator[_Finding]:
    if not isinstance(data, dict):
        yield from _walk(data, ())
        return
    if data.get("kind") == "Config" and "users" in data:
        yield (), "a kubeconfig with users", False
        return
    if str(data.get("kind", "")).endswith("List") and isinstance(data.get("items"), list):
        for index, item in enumerate(data["items"]):
            for pointer, what, key in _findings(item):
                yield ("items", index, *pointer), what, key
        return
    secret_fields = ("data", "stringData") if data.get("kind") == "Secret" else ()
    for key, child in data.items():
        if key in secret_fields and child:
            yield (key,), f"Secret with inline {key}", False
        else:
            yield from _walk({key: child}, ())


def _has_value(value: Any) -> bool:
    """A credential value: a non-empty string or a number (``password: 84736251``)."""
    if isinstance(value, str):
        return bool(value.strip())
    return isinstance(value, int | float) and not isinstance(value, bool)


def _walk(value: Any, pointer: Pointer) -> Iterator[_Finding]:
    if isinstance(value, dict):
        yield from _mapping(value, pointer)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _walk(child, (*pointer, index))
    elif isinstance(value, str):
        what = _string_kind(value)
        if what is not None:
            yield pointer, what, False


def _mapping(value: dict[Any, Any], pointer: Pointer) -> Iterator[_Finding]:
    secret_env = _is_secret_env(value)
    if secret_env:
        yield (*pointer, "value"), _LITERAL_ENV_FOUND, False
    for key, child in value.items():
        what, credential, auth = _key_class(str(key))
        if what is not None:
            yield (*pointer, key), f"{what} as a key", True
        elif credential and _has_value(child):
            yield (*pointer, key), f"inline credential '{key}'", False
        elif auth and isinstance(child, str) and _USER_PASSWORD.match(child.strip()):
            yield (*pointer, key), "a user:password credential", False
        elif isinstance(child, str):  # the common case, without building a pointer
            what = None if secret_env and key == "value" else _string_kind(child)
            if what is not None:
                yield (*pointer, key), what, False
        elif isinstance(child, dict | list):
            yield from _walk(child, (*pointer, key))


@functools.lru_cache(maxsize=1 << 16)
def _key_class(key: str) -> tuple[str | None, bool, bool]:
    """A key's secret shape, whether it names a credential, whether it names auth (keys repeat
    across a repo's documents: each is looked at once)."""
    return token_kind(key), _normal(key) in CREDENTIAL_KEYS, _is_auth_key(key)


def _string_kind(text: str) -> str | None:
    if len(text) <= _SHORT:
        return _short_string_kind(text)
    return _find_string_kind(text)


#: Strings up to this length are remembered (names, labels, versions repeat across a repo).
_SHORT = 128


@functools.lru_cache(maxsize=1 << 16)
def _short_string_kind(text: str) -> str | None:
    return _find_string_kind(text)


def _find_string_kind(text: str) -> str | None:
    if _PEM_MARKER in text:
        return "a PEM private key"
    if "\n" in text and _KUBECONFIG_KIND.search(text) and _KUBECONFIG_USERS.search(text):
        return "a kubeconfig"
    what = token_kind(text)
    if what is not None:
        return what
    if "$" in text or "{SHA}" in text:
        return "an htpasswd entry" if _HTPASSWD.search(text) else None
    return None


def _normal(key: Any) -> str:
    return str(key).lower().replace("-", "").replace("_", "")


def _is_auth_key(key: Any) -> bool:
    """``basicAuth``, ``auth``, ``nginx.ingress.kubernetes.io/auth-...``: the name after the
    last ``/`` mentions auth."""
    return "auth" in str(key).rsplit("/", 1)[-1].lower()


def _is_secret_env(entry: dict[Any, Any]) -> bool:
    """``{name: DB_PASSWORD, value: hunter2}``: a variable named like a secret, set literally."""
    name = entry.get("name")
    if not isinstance(name, str) or not _has_value(entry.get("value")):
        return False
    words = re.split(r"[-_.]", name.upper())
    if words[-1] in _REFERENCE_SUFFIXES:
        return False
    compact = "".join(words)
    return any(part in compact for part in _SECRET_ENV_PARTS)
