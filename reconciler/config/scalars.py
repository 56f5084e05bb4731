"""Plain YAML scalars read as Kubernetes reads them (``kubectl apply -f``, the API server).

Kubernetes reads YAML with sigs.k8s.io/yaml, which decodes with goyaml.v2's rules and converts
the result to JSON. Its plain-scalar rules differ from PyYAML's YAML 1.1 ones; we follow
Kubernetes so that what we render, diff and apply is what ``kubectl apply`` would send:

- booleans: ``y Y yes Yes YES true True TRUE on On ON`` and ``n N no No NO false False FALSE
  off Off OFF`` (PyYAML does not know ``y``/``n``);
- null: the empty scalar, ``~``, ``null``, ``Null``, ``NULL``;
- integers: Go's ``strconv.ParseInt(s, 0, 64)`` after removing every ``_``: decimal, ``0x``,
  ``0o``, ``0b`` and a leading ``0`` for octal (``0777`` is 511, ``0o17`` is 15), then unsigned
  64-bit; no base 60 (``1:20`` stays a string);
- floats: ``[-+]?(.d+|d+(.d*)?)([eE][-+]?d+)?`` (``1e3`` is a number), sent as JSON numbers, so
  an integral float is an integer (``1e3`` reaches the server as ``1000``); a float out of
  range stays a string, as Go's parser refuses it; ``.inf`` and ``.nan`` cannot be sent as
  JSON, so they are refused (quote them);
- timestamps stay strings (``2001-12-14``), as goyaml.v2 keeps them for untyped values;
- everything else is a string (``=`` included: PyYAML reads it as the ``!!value`` tag).

Mapping keys are turned into JSON's string keys the way sigs.k8s.io/yaml does (``y: 1`` is
``{"true": 1}``; a float key is written in Go's shortest ``%g`` form of a float32); a null key
is refused, as kubectl refuses it. The table with an example per rule is docs/yaml.md; each row
is a test (tests/config/test_yaml_conformance.py).

:func:`surprise` says when Kubernetes' reading of a plain scalar would likely surprise its
author (``y`` read as ``true``, ``0777`` as 511), for ``validate`` to warn about.

Pure; used by :mod:`reconciler.config.yamlsafe`.
"""

from __future__ import annotations

import math
import re
import struct
from typing import Any

_TAG = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL, MERGE = (
    _TAG + t for t in ("str", "int", "float", "bool", "null", "merge")
)

_BOOLEANS: dict[str, bool] = {
    **dict.fromkeys(
        ("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True
    ),
    **dict.fromkeys(
        ("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False
    ),
}
_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_NOT_JSON = frozenset(
    (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan")
) | {".NaN", ".NAN"}
#: Where goyaml.v2 tries a number at all: the first character is a sign, a digit or a dot.
_NUMBER_START = frozenset("+-.0123456789")
_GO_INT = re.compile(
    r"[-+]?(?:0[xX](?P<hex>[0-9a-fA-F]+)|0[oO](?P<oct>[0-7]+)|0[bB](?P<bin>[01]+)"
    r"|(?P<zoct>0[0-7]*)|(?P<dec>[1-9][0-9]*))"
)
_GO_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_INT64 = (-(2**63), 2**63 - 1)
_UINT64_MAX = 2**64 - 1
#: Go writes a float64 as a JSON number in decimal notation below this magnitude.
_JSON_DECIMAL_LIMIT = 1e21
#: Longest decimal of an int64/uint64 (longer ones are out of range: Go tries a float).
_MAX_DECIMAL_DIGITS = 20


class NotJsonError(ValueError):
    """A plain scalar Kubernetes reads as a number JSON cannot carry (``.inf``, ``.nan``)."""


def read_plain(text: str) -> tuple[str, Any]:
    """The tag and the JSON value of the plain scalar ``text``, as Kubernetes reads it.

    Raises :class:`NotJsonError` for the infinities and NaN (kubectl cannot send them either).
    """
    boolean = _BOOLEANS.get(text)
    if boolean is not None:
        return BOOL, boolean
    if text in _NULLS:
        return NULL, None
    if text == "<<":
        return MERGE, text
    if not text or text[0] not in _NUMBER_START:
        return STR, text
    if text in _NOT_JSON:
        raise NotJsonError(text)
    number = _number(text)
    return (STR, text) if number is None else number


def _number(text: str) -> tuple[str, Any] | None:
    # after a sign or digit goyaml.v2 drops every "_"; after a dot it asks Go's float parser,
    # which takes none
    plain = text if text[0] == "." else text.replace("_", "")
    integer = _go_int(plain)
    if integer is not None:
        return INT, integer
    if _GO_FLOAT.fullmatch(plain) is None:
        return None
    value = float(plain)
    if math.isinf(value):
        return None  # Go's ParseFloat refuses it as out of range: the text stays a string
    return FLOAT, json_number(value)


def _go_int(plain: str) -> int | None:
    """``strconv.ParseInt(plain, 0, 64)``, else ``ParseUint``: None when neither reads it."""
    found = _GO_INT.fullmatch(plain)
    if found is None:
        return None
    groups = found.groupdict()
    if groups["dec"] is not None:
        if len(groups["dec"]) > _MAX_DECIMAL_DIGITS:
            return None
        value = int(plain)
    else:
        value = _prefixed(plain, groups)
    if _INT64[0] <= value <= _INT64[1]:
        return value
    return value if 0 <= value <= _UINT64_MAX and plain[0] != "+" else None


def _prefixed(plain: str, groups: dict[str, str | None]) -> int:
    negative = plain[0] == "-"
    for name, base in (("hex", 16), ("oct", 8), ("bin", 2), ("zoct", 8)):
        digits = groups[name]
        if digits is not None:
            value = int(digits, base) if digits else 0  # a power-of-two base: linear
            return -value if negative else value
    raise AssertionError("the pattern has no other group")


def json_number(value: float) -> int | float:
    """``value`` as Go's JSON encoder writes it, read back: integral floats below 1e21 have
    no fraction or exponent, so the server reads them as integers (``1e3`` is ``1000``)."""
    if value.is_integer() and abs(value) < _JSON_DECIMAL_LIMIT:
        return int(value)
    return value


def key_string(tag: str, value: Any) -> str:
    """A mapping key of tag ``tag`` and read value ``value`` as sigs.k8s.io/yaml turns it into a
    JSON key. Raises ValueError for a null key (kubectl refuses those too)."""
    if tag in (STR, MERGE):
        return str(value)
    if tag == BOOL:
        return "true" if value else "false"
    if tag == NULL:
        raise ValueError("null key")
    if tag == FLOAT:
        return go_float32_g(float(value))
    return str(value)


def go_float32_g(value: float) -> str:
    """Go's ``strconv.FormatFloat(value, 'g', -1, 32)``: the shortest float32 digits, in
    exponent form when the exponent is below -4 or at least 6 (``1e+06``)."""
    if value == 0:
        return "0"
    single = struct.unpack("f", struct.pack("f", value))[0]
    for precision in range(0, 9):
        digits = f"{single:.{precision}e}"
        if struct.unpack("f", struct.pack("f", float(digits)))[0] == single:
            break
    mantissa, exponent_text = digits.split("e")
    exponent = int(exponent_text)
    mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
    if exponent < -4 or exponent >= 6:
        return f"{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    return f"{float(mantissa) * 10**exponent:.{max(0, _decimals(mantissa) - exponent)}f}"


def _decimals(mantissa: str) -> int:
    return len(mantissa.split(".")[1]) if "." in mantissa else 0


_SURPRISING_BOOLEANS = frozenset(t for t in _BOOLEANS if t.lower() not in ("true", "false"))
_LEGACY_OCTAL = re.compile(r"[-+]?0[0-9_]+")


def surprise(text: str) -> str | None:
    """Why Kubernetes' reading of the plain scalar ``text`` would likely surprise its author,
    or None: a word read as a boolean (``y``, ``no``, ``on``) or a leading zero read as octal
    (``0777`` is 511)."""
    if text in _SURPRISING_BOOLEANS:
        word = "true" if _BOOLEANS[text] else "false"
        return f"'{text}' is read as the boolean {word} by Kubernetes; quote it if it is a string"
    if _LEGACY_OCTAL.fullmatch(text) and text.replace("_", "").lstrip("+-") != "0":
        tag, value = read_plain(text)
        if tag != STR:
            return (
                f"'{text}' is read as the number {value} by Kubernetes (a leading 0 reads as "
                "octal where it can); quote it if it is a string, or write 0o17 for octal 17"
            )
    return None
