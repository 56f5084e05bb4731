"""The shapes of secrets, to find them and to mask them (rule S4) (pure).

A token has a shape that gives it away: a provider's prefix (``ghp_``, ``AKIA``, ``xoxb-``),
the three base64url parts of a JWT, the credentials after ``Bearer`` or ``Basic``, a password
between ``://`` and ``@`` in a URL. :func:`token_kind` names the first shape found in a string
(the credential scan uses it on every key and string of the repo); :func:`mask` replaces each
one with ``***`` (every diagnostic passes through it, and the daemon's log lines and
``/status``), so a secret that slipped past the scan is still never shown;
:func:`is_login_base64` tells a base64 ``user:password`` (for ``Basic`` and a registry's
``auth``). Callers: the
credential scan, diagnostics, the loader, the daemon and its logs.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar, cast

MASK = "***"
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Shape:
    """A secret's shape: what it is, literals one of which any match holds (a quick test
    before the pattern is run), and the pattern."""

    what: str
    needles: tuple[str, ...]
    #: The pattern's text, compiled on first use: a scan runs all shapes as one pattern
    #: (:data:`_ANY`) and one shape alone only where that one matched.
    source: str

    @property
    def pattern(self) -> re.Pattern[str]:
        """The compiled pattern (``re`` keeps it once compiled)."""
        return re.compile(self.source)

    def search(self, text: str) -> re.Match[str] | None:
        """The first match in ``text``."""
        if not any(needle in text for needle in self.needles):
            return None
        return self.pattern.search(text)


_IN_URL = "a password in a URL"


def _shape(what: str, needles: str, pattern: str) -> Shape:
    return Shape(what, tuple(needles.split()), pattern)


#: The shapes of well-known issuers, and of credentials in HTTP and URLs. Each runs in time
#: linear in the text it searches (Python's ``re`` backtracks, so this is by construction;
#: ``tests/config/test_credential_scan.py`` checks it): a shape opens with a literal prefix and a
#: look-behind that lets it start only at the beginning of a run of its characters (so no two
#: starts scan the same run), and every unbounded repeat is possessive (``++``, ``*+``,
#: ``{n,}+``: what it took is never given back, so never tried again).
SHAPES: tuple[Shape, ...] = (
    _shape("an AWS access key id", "AKIA ASIA", r"A(?<!\wA)(?:KIA|SIA)[A-Z0-9]{16}+\b"),
    _shape(
        "a GitHub token", "ghp_ gho_ ghu_ ghs_ ghr_", r"gh(?<!\wgh)[pousr]_[A-Za-z0-9]{36,255}+\b"
    ),
    _shape(
        "a GitHub token", "github_pat_", r"github_pat_(?<!\wgithub_pat_)[A-Za-z0-9_]{22,255}+\b"
    ),
    _shape("a GitLab token", "glpat-", r"glpat-(?<!\wglpat-)[A-Za-z0-9_-]{20,}+"),
    _shape("a Slack token", "xox", r"xox(?<!\wxox)[abeprs]-[A-Za-z0-9-]{10,}+"),
    _shape("a Google API key", "AIza", r"AIza(?<!\wAIza)[0-9A-Za-z_-]{35}+"),
    _shape("a Stripe key", "sk_live_ sk_test_", r"sk_(?<!\wsk_)(?:live|test)_[0-9A-Za-z]{16,}+"),
    _shape("a Stripe key", "rk_live_ rk_test_", r"rk_(?<!\wrk_)(?:live|test)_[0-9A-Za-z]{16,}+"),
    _shape("an npm token", "npm_", r"npm_(?<!\wnpm_)[A-Za-z0-9]{36}+\b"),
    _shape("a PyPI token", "pypi-AgE", r"pypi-(?<!\wpypi-)AgE[A-Za-z0-9_-]{50,}+"),
    _shape("a SendGrid key", "SG.", r"SG\.(?<!\wSG\.)[A-Za-z0-9_-]{22}+\.[A-Za-z0-9_-]{43}+"),
    _shape("a Vault token", "hvs. hvb.", r"hv(?<!\whv)[sb]\.[A-Za-z0-9_-]{24,}+"),
    _shape("a Docker Hub token", "dckr_pat_", r"dckr_pat_(?<!\wdckr_pat_)[A-Za-z0-9_-]{27,}+"),
    _shape(
        "an OpenAI or Anthropic key", "sk-ant- sk-proj-", r"sk-(?<!\wsk-)(?:ant|proj)-[\w-]{32,}+"
    ),
    _shape(
        "a JSON Web Token",
        "eyJ",
        r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+",
    ),
    # 16+ token characters with a digit: "Bearer token" or "Bearer <token>" in prose is not one
    _shape(
        "a Bearer token",
        "earer EARER",
        r"[Bb](?<!\w[Bb])(?:earer|EARER)\s++(?=[A-Za-z._~+/-]*+\d)[A-Za-z0-9._~+/-]{16,}+=*+",
    ),
    _shape(
        _IN_URL,
        "://",
        r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*+://[^/\s:@]*+:[^/\s@]++@",
    ),
)
#: ``Basic <base64 of user:password>``; checked by decoding, so "Basic Authentication" is not one.
_BASIC = _shape(
    "a Basic credential",
    "asic ASIC",
    r"[Bb](?<!\w[Bb])(?:asic|ASIC)\s++([A-Za-z0-9+/]{8,}+={0,2}+)(?![A-Za-z0-9+/=])",
)
#: Any userinfo in a URL (``https://token@host``, ``https://user:pass@host``), for masking.
_USERINFO = re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*+://)[^/\s@]++@")


#: Any shape but a URL's, in one pass (most strings have none; a URL's needs ``://``) ...
_ANY = re.compile("|".join(f"(?:{s.source})" for s in (*SHAPES, _BASIC) if s.what != _IN_URL))
_ALL = (*SHAPES, _BASIC)
_URL_ONLY = tuple(shape for shape in SHAPES if shape.what == _IN_URL)
#: ... for strings up to this length; a longer one is searched for each shape's literals
#: (``str.__contains__`` scans faster than ``re`` tries many shapes at every place).
_ONE_PASS = 4096


def _candidates(text: str) -> tuple[Shape, ...]:
    """The shapes ``text`` may hold, quickly (none for most strings): all of them (and Basic),
    or only a URL's."""
    if len(text) > _ONE_PASS or _ANY.search(text) is not None:
        return _ALL
    return _URL_ONLY if "://" in text else ()


def token_kind(text: str) -> str | None:
    """What secret ``text`` holds (``"a GitHub token"``), or ``None`` when it has no shape of
    one."""
    for shape in _candidates(text):
        if shape is _BASIC:
            if _has_basic(text):
                return shape.what
        elif shape.search(text):
            return shape.what
    return None


def _has_basic(text: str) -> bool:
    if _BASIC.search(text) is None:
        return False
    return any(_is_basic(m) for m in _BASIC.pattern.finditer(text))


def mask(text: str) -> str:
    """``text`` with every secret shape and every URL's user information replaced by ``***``."""
    if "://" in text:
        text = _USERINFO.sub(rf"\1{MASK}@", text)
    for shape in _candidates(text):
        if shape.search(text):
            replace = _masked_basic if shape is _BASIC else _keep_scheme
            text = shape.pattern.sub(replace, text)
    return text


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
    """Whether ``Basic <x>`` holds base64 of ``user:password`` (its padding may be left out)."""
    encoded = match.group(1)
    return is_login_base64(encoded + "=" * (-len(encoded) % 4))


def is_login_base64(encoded: str) -> bool:
    """Whether ``encoded`` is base64 of printable UTF-8 ``user:password`` (HTTP Basic, a
    registry's ``auth``)."""
    try:
        text = base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    user, colon, password = text.partition(":")
    return bool(colon and user and password) and text.isprintable()


def _masked_basic(match: re.Match[str]) -> str:
    if not _is_basic(match):
        return match.group(0)
    return match.group(0)[: match.start(1) - match.start(0)] + MASK


#: ``password=`` in a URL's query (libpq reads a password there too).
_QUERY_PASSWORD = re.compile(r"([?&]password=)([^&#]*+)", re.IGNORECASE)


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
