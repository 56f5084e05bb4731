"""Credentials inside one string of the config repo: what :func:`text_kind` finds (rule C6)
(pure).

A string may be a whole file: a ConfigMap's ``app.properties``, ``.env``, ``config.json`` or a
kubeconfig, a container's command line, a connection string. Found, in this order:

- a PEM private key (``-----BEGIN ... PRIVATE KEY-----``);
- a kubeconfig, as YAML (``kind: Config`` and ``users:`` lines) or as JSON;
- every token shape of :mod:`reconciler.core.redaction`, and an htpasswd line;
- a name of a credential (:mod:`reconciler.config.credential_names`) set to a literal value:
  ``NAME=value`` (``.env``, ``.properties``, ``--password=x``, ``Password=x;`` in a connection
  string, ``PWD=x`` after a ``;``), ``--password value``, ``"name": "value"`` (JSON) and, in a
  text of several lines, ``name: value`` at a line's start (embedded YAML, ``.properties``);
  not in prose (a schema's ``description``), where "--token value" and "token=x" are words;
- a registry login: ``"auth": "<base64 of user:password>"`` (``.dockerconfigjson``);
- any of these inside a string that is wholly base64 (a kubeconfig or a ``.env`` encoded).

**Time.** Python's ``re`` backtracks; every pattern here is written to run in time linear in
the text (see :mod:`reconciler.core.redaction`; ``tests/config/test_credential_scan.py`` checks
them). A long string is searched in windows of :data:`WINDOW` characters, cut after a newline where
one is near (a hard cut overlaps the next window by :data:`OVERLAP` characters), and ``check`` (the
time budget's) is called before each window, so a scan can be stopped part way. Callers:
:mod:`reconciler.config.credentials`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from reconciler.config.credential_names import is_credential_name, is_reference
from reconciler.core.redaction import is_login_base64, token_kind

#: Characters searched at once between two calls of the budget's check ...
WINDOW = 1 << 16
#: ... and how far a hard cut (no newline near it) reaches back into the window before.
OVERLAP = 1 << 12

_PEM_MARKER = "PRIVATE KEY-----"
_KUBECONFIG_KIND = re.compile(
    r"""(?m)^[ \t]*+["']?+kind["']?+[ \t]*+:[ \t]*+["']?+Config["']?+[ \t]*+,?+[ \t\r]*+$"""
)
_KUBECONFIG_USERS = re.compile(r"""(?m)^[ \t]*+["']?+users["']?+[ \t]*+:""")
_JSON_KUBECONFIG_KIND = re.compile(r'"kind"[ \t\r\n]*+:[ \t\r\n]*+"Config"')
_JSON_KUBECONFIG_USERS = re.compile(r'"users"[ \t\r\n]*+:')
_HTPASSWD = re.compile(r"(?m)^[^\s:]++:(?:\$apr1\$|\$2[abxy]?+\$\d\d\$|\$[156]\$|\{SHA\})\S++")

#: A name ends as a credential's may (a cheap sieve before :func:`is_credential_name`).
_ENDINGS = ("password", "passwd", "passphrase", "token", "secret", "key", "pass", "pwd")
_ENDS = "(?i:{})".format(
    "|".join(f"(?<={end})" for end in (*_ENDINGS, "data", "json", "cfg", "auth"))
)
_NAME = r"([A-Za-z][\w.-]{0,127}+)" + _ENDS
_VALUE = r"([^\s;&,]{1,64}+)"
#: ``NAME=value``, ``--name=value``, ``Name = value``.
_ASSIGNMENT = re.compile(r"(?<![\w.-])-{0,2}+" + _NAME + r"[ \t]*+=[ \t]*+" + _VALUE)
#: ``--name value``.
_FLAG = re.compile(r"--(?<![\w-]--)" + _NAME + r"[ \t]++" + _VALUE)
#: ``"name": "value"``.
_JSON_PAIR = re.compile(r'"' + _NAME + r'"[ \t\r\n]*+:[ \t\r\n]*+"([^"\\]{1,1024}+)')
#: ``name: value`` at a line's start (``- name: value``, ``"name": value`` too).
_LINE_PAIR = re.compile(
    r"""(?m)^[ \t]*+(?:-[ \t]++)?+["']?+""" + _NAME + r"""["']?+[ \t]*+:[ \t]*+([^\s#]{1,64}+)"""
)
#: YAML's booleans (``automountServiceAccountToken: false`` sets no credential).
_BOOLEANS = frozenset({"true", "false"})
#: A string that is wholly base64 (lines of it).
_BASE64 = re.compile(r"[A-Za-z0-9+/\r\n]++={0,2}+[\r\n]*+")
_SHORTEST_BASE64 = 24


def _nothing() -> None:
    """A check that never stops a scan."""


def text_kind(
    text: str, *, prose: bool = False, check: Callable[[], None] = _nothing
) -> str | None:
    """What credential ``text`` holds (``"a GitHub token"``), or ``None``. ``prose``: the text
    is words (a description), where names set to values are not looked for. ``check`` is called
    before each window of a long text and may raise to stop the scan."""
    what = _plain_kind(text, prose, check)
    if what is not None:
        return what
    decoded = _base64_text(text)
    if decoded is None:
        return None
    what = _plain_kind(decoded, False, check)
    return None if what is None else f"{what}, base64-encoded"


def windows(text: str) -> Iterator[str]:
    """``text`` in pieces of at most :data:`WINDOW` characters, cut after a newline within the
    last :data:`OVERLAP` characters of a piece, or else cut anywhere and overlapping the next
    piece by :data:`OVERLAP` (a token shorter than that is whole in one of the two)."""
    start = 0
    while len(text) - start > WINDOW:
        end = start + WINDOW
        newline = text.rfind("\n", end - OVERLAP, end)
        if newline >= 0:
            yield text[start : newline + 1]
            start = newline + 1
        else:
            yield text[start:end]
            start = end - OVERLAP
    yield text[start:] if start else text


def _plain_kind(text: str, prose: bool, check: Callable[[], None]) -> str | None:
    if _PEM_MARKER in text:
        return "a PEM private key"
    kubeconfig = _Kubeconfig()
    for window in windows(text):
        check()
        what = kubeconfig.find(window) or _window_kind(window, prose)
        if what is not None:
            return what
    return None


@dataclass(slots=True)
class _Kubeconfig:
    """The two marks of a kubeconfig, met in any window of a text."""

    kind: bool = False
    users: bool = False

    def find(self, window: str) -> str | None:
        """``"a kubeconfig"`` once both marks were met."""
        if "\n" in window:
            self.kind = self.kind or ("kind" in window and _has(_KUBECONFIG_KIND, window))
            self.users = self.users or ("users" in window and _has(_KUBECONFIG_USERS, window))
        if '"Config"' in window:
            self.kind = self.kind or _JSON_KUBECONFIG_KIND.search(window) is not None
        if '"users"' in window:
            self.users = self.users or _JSON_KUBECONFIG_USERS.search(window) is not None
        return "a kubeconfig" if self.kind and self.users else None


def _has(pattern: re.Pattern[str], window: str) -> bool:
    return pattern.search(window) is not None


def _window_kind(window: str, prose: bool) -> str | None:
    what = token_kind(window)
    if what is not None:
        return what
    if ("$" in window or "{SHA}" in window) and _HTPASSWD.search(window):
        return "an htpasswd entry"
    if prose:
        return None
    if '"' in window:
        what = _json_kind(window)
        if what is not None:
            return what
    if "=" in window:
        what = _assignment_kind(window)
        if what is not None:
            return what
    if "--" in window:
        what = _first_set(_FLAG, window, "--")
        if what is not None:
            return what
    if "\n" not in window or ":" not in window:
        return None
    return _first_set(_LINE_PAIR, window, "", yaml_line=True)


def _assignment_kind(window: str) -> str | None:
    for match in _ASSIGNMENT.finditer(window):
        name, value = match.group(1, 2)
        odbc = name.lower() == "pwd" and window[max(match.start() - 1, 0)] == ";"
        if (odbc or is_credential_name(name)) and _is_literal(value):
            return _set_inline(match.group(0).partition("=")[0].strip())
    return None


def _first_set(
    pattern: re.Pattern[str], window: str, prefix: str, *, yaml_line: bool = False
) -> str | None:
    """The first name of a credential set to a literal by ``pattern``; a ``yaml_line``'s value
    that is YAML's structure (``{``, ``[``, an ``*alias``) or a boolean is no literal."""
    for match in pattern.finditer(window):
        name, value = match.group(1, 2)
        if not is_credential_name(name) or not _is_literal(value) or value.startswith("-"):
            continue
        if not (yaml_line and (value[0] in "{[*" or value.lower() in _BOOLEANS)):
            return _set_inline(prefix + name)
    return None


def _json_kind(window: str) -> str | None:
    for match in _JSON_PAIR.finditer(window):
        name, value = match.group(1, 2)
        if name.lower() == "auth" and is_login_base64(value):
            return "a registry login ('auth': base64 of user:password)"
        if is_credential_name(name) and _is_literal(value):
            return _set_inline(name)
    return None


def _set_inline(name: str) -> str:
    return f"inline credential '{name}' in the text"


def _is_literal(value: str) -> bool:
    """A value set literally (not a reference, and not ``==``)."""
    return not value.startswith("=") and not is_reference(value)


def _base64_text(text: str) -> str | None:
    """The text that ``text`` holds in base64, if it is wholly base64 of UTF-8 text."""
    text = text.strip()
    if len(text) < _SHORTEST_BASE64 or _BASE64.fullmatch(text) is None:
        return None
    try:
        decoded = base64.b64decode(text.replace("\n", "").replace("\r", ""), validate=True)
        return decoded.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
