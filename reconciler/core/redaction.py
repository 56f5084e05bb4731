"""The shapes of secrets, to find them and to mask them (rule S4) (pure).

A token has a shape that gives it away: a provider's prefix (``ghp_``, ``AKIA``, ``xoxb-``),
the three base64url parts of a JWT, the credentials after ``Bearer`` or ``Basic``, a password
between ``://`` and ``@`` in a URL. :func:`token_kind` names the first shape found in a string
(the credential scan uses it on every key and string of the repo); :func:`mask` replaces each
one with ``***`` (every diagnostic passes through it, and the daemon's log lines and
``/status``), so a secret that slipped past the scan is still never shown. Callers: the
credential scan, diagnostics, the loader, the daemon and its logs.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import TypeVar, cast

MASK = "***"
_T = TypeVar("_T")

#: (what it is, its shape); the shapes of well-known issuers, each anchored on its prefix.
_SHAPES: tuple[tuple[str, str], ...] = (
    ("an AWS access key id", r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    ("a GitHub token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    ("a GitLab token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    ("a Slack token", r"\bxox[baprs]-[A-Za-z0-9-]{10,}"),
    ("a Google API key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("a JSON Web Token", r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    # 16+ token characters with a digit: "Bearer token" or "Bearer <token>" in prose is not one
    ("a Bearer token", r"\b[Bb](?:earer|EARER)\s+(?=[A-Za-z0-9._~+/-]*\d)[A-Za-z0-9._~+/-]{16,}=*"),
    ("a password in a URL", r"\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@"),
)
_TOKENS = [(what, re.compile(shape)) for what, shape in _SHAPES]
#: ``Basic <base64 of user:password>``; checked by decoding, so "Basic Authentication" is not one.
_BASIC = re.compile(r"\b[Bb](?:asic|ASIC)\s+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])")
#: Any shape at all, one pass over the text (most strings have none).
_ANY = re.compile("|".join(f"(?:{shape})" for _, shape in _SHAPES) + "|" + _BASIC.pattern)
#: Any userinfo in a URL (``https://token@host``, ``https://user:pass@host``), for masking.
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]+@")


def token_kind(text: str) -> str | None:
    """What secret ``text`` holds (``"a GitHub token"``), or ``None`` when it has no shape of
    one."""
    if _ANY.search(text) is None:
        return None
    for what, shape in _TOKENS:
        if shape.search(text):
            return what
    if any(_is_basic(m) for m in _BASIC.finditer(text)):
        return "a Basic credential"
    return None


def mask(text: str) -> str:
    """``text`` with every secret shape and every URL's user information replaced by ``***``."""
    if "://" in text:
        text = _USERINFO.sub(rf"\1{MASK}@", text)
    if _ANY.search(text) is None:
        return text
    for _, shape in _TOKENS:
        text = shape.sub(_keep_scheme, text)
    return _BASIC.sub(_masked_basic, text)


def mask_all(value: _T) -> _T:
    """``value`` (JSON-like: mappings, lists, strings) with :func:`mask` applied to every string."""
    return cast(_T, _map_strings(value, mask))


def _map_strings(value: object, change: Callable[[str], str]) -> object:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {change(str(k)): _map_strings(v, change) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_map_strings(v, change) for v in value]
    return value


def _keep_scheme(match: re.Match[str]) -> str:
    found = match.group(0)
    for prefix in ("Bearer ", "BEARER ", "bearer "):
        if found.startswith(prefix):
            return prefix + MASK
    scheme, separator, _ = found.partition("://")
    return f"{scheme}://{MASK}@" if separator else MASK


def _is_basic(match: re.Match[str]) -> bool:
    """Whether ``Basic <x>`` holds base64 of ``user:password``."""
    encoded = match.group(1)
    try:
        decoded = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
        text = decoded.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    user, colon, password = text.partition(":")
    return bool(colon and user and password) and text.isprintable()


def _masked_basic(match: re.Match[str]) -> str:
    if not _is_basic(match):
        return match.group(0)
    return match.group(0)[: match.start(1) - match.start(0)] + MASK


#: ``password=`` in a URL's query (libpq reads a password there too).
_QUERY_PASSWORD = re.compile(r"([?&]password=)([^&#]*)", re.IGNORECASE)


def url_passwords(url: str) -> list[str]:
    """The passwords ``url`` carries, as written: after ``user:`` in its user information (up
    to its last ``@``, so an unescaped ``@`` or ``/`` in a password is still covered) and in any
    ``password=`` parameter."""
    found = [match.group(2) for match in _QUERY_PASSWORD.finditer(url)]
    _, separator, rest = _QUERY_PASSWORD.sub("", url).partition("://")
    userinfo, at, _ = rest.rpartition("@")
    if separator and at and ":" in userinfo:
        found.append(userinfo.partition(":")[2])
    return [password for password in found if password]


def mask_url_password(url: str) -> str:
    """``url`` with every password it carries (see :func:`url_passwords`) replaced by ``***``;
    the user name stays, since it says whom to check."""
    text = _QUERY_PASSWORD.sub(rf"\g<1>{MASK}", url)
    scheme, separator, rest = text.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if separator and at and ":" in userinfo:
        text = f"{scheme}://{userinfo.partition(':')[0]}:{MASK}@{host}"
    return text
