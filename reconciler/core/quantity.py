"""Kubernetes resource quantities as the API server writes them back (pure).

The server parses a quantity (``1000m``, ``0.5``, ``1024Mi``, ``1e3``) and answers it in its own
words: the canonical form (``1``, ``500m``, ``1Gi``), unless the text was already canonical
enough to be kept as written (``1e3``, ``+1``, ``01``; apimachinery's ``ParseQuantity`` keeps
such a string). Values finer than nano are rounded up to nano, and a core/v1 ``ResourceList``
(requests, limits, overhead, quotas) is rounded up to milli. Figures checked on a real API server
(tests/contract/test_server_normalises.py). Callers: :mod:`reconciler.core.serverform`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from fractions import Fraction

_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exponent: suffix for suffix, exponent in _DECIMAL.items()}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_SUFFIX = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_NUMBER = re.compile(r"([+-]?)0*(\d*)(?:\.(\d*))?(.*)", re.DOTALL)
_EXPONENT = re.compile(r"[eE]([+-]?\d+)")
#: The most digits apimachinery keeps in an int64 (its fast path).
_INT64_DIGITS = 18
NANO = -9
MILLI = -3


@dataclass(frozen=True, slots=True)
class _Parsed:
    """A parsed quantity: its value, its format (``SI``, ``binary`` or ``exponent``), the scale
    of its last digit and the text as written when the server keeps that text."""

    value: Fraction
    format: str
    scale: int
    kept: str | None


def canonical_quantity(value: object, *, scale: int = NANO) -> str | None:
    """What the server answers for the quantity ``value`` (a string or a JSON number), rounded
    up to ``10**scale`` (:data:`MILLI` for a ``ResourceList``); ``None`` when it is no quantity."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    text = value.strip() if isinstance(value, str) else json.dumps(value)
    parsed = _parse(text)
    if parsed is None:
        return None
    if parsed.kept is not None and parsed.scale >= scale:
        return parsed.kept
    return _format(_round_up(parsed.value, scale), parsed.format)


def _parse(text: str) -> _Parsed | None:
    match = _NUMBER.fullmatch(text)
    if match is None or not any(c.isdigit() for c in text):
        return None
    sign, num, denom = match.group(1), match.group(2) or "0", match.group(3) or ""
    found = _suffix(match.group(4))
    if found is None:
        return None
    form, base, exponent = found
    value = Fraction(int(num + denom), 10 ** len(denom)) * Fraction(base) ** exponent
    value = -value if sign == "-" else value
    scale = (exponent if base == 10 else 0) - len(denom)
    kept = text if _kept(form, num, denom, exponent, scale) else None
    return _Parsed(_round_up(value, NANO), form, scale, kept)


def _suffix(suffix: str) -> tuple[str, int, int] | None:
    """(format, base, exponent) of a suffix."""
    if suffix in _DECIMAL:
        return "SI", 10, _DECIMAL[suffix]
    if suffix in _BINARY:
        return "binary", 2, _BINARY[suffix]
    match = _EXPONENT.fullmatch(suffix)
    if match is not None:
        return "exponent", 10, int(match.group(1))
    return None


def _kept(form: str, num: str, denom: str, exponent: int, scale: int) -> bool:
    """Whether apimachinery keeps the text as written (its int64 fast path, canonical there)."""
    shifted = num + denom
    if form == "binary":
        digits = 15 - len(num) - int(exponent * 3 / 10) - 1
        return not denom and digits >= 0 and int(num) & 7 != 0
    if _INT64_DIGITS - len(shifted) < 0 or scale < NANO:
        return False
    return scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"


def _round_up(value: Fraction, scale: int) -> Fraction:
    """``value`` rounded away from zero to a multiple of ``10**scale``."""
    step = Fraction(10) ** scale
    units = value / step
    whole = math.ceil(abs(units))
    return Fraction(whole if units >= 0 else -whole) * step


def _format(value: Fraction, form: str) -> str | None:
    if value == 0:
        return "0"
    if form == "binary" and (abs(value) < 1024 or value.denominator != 1):
        form = "SI"
    sign = "-" if value < 0 else ""
    if form == "binary":
        amount, power = abs(value.numerator), 0
        while amount % 1024 == 0 and power < len(_BINARY_SUFFIX) - 1:
            amount, power = amount // 1024, power + 1
        return f"{sign}{amount}{_BINARY_SUFFIX[power]}"
    mantissa, exponent = abs(value * 10**-NANO).numerator, NANO
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    down = exponent % 3
    mantissa, exponent = mantissa * 10**down, exponent - down
    if form == "exponent":
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    suffix = _DECIMAL_SUFFIX.get(exponent)
    return None if suffix is None else f"{sign}{mantissa}{suffix}"
