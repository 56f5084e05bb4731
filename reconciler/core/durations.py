"""Durations as written in the config repo and on the command line: ``24h``, ``90m``, ``1h30m``,
``45s`` (pure).
"""

from __future__ import annotations

import re

_SECONDS = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_duration(text: str) -> float:
    """Seconds of a ``24h``/``90m``/``1h30m``/``45s`` duration (schema-checked before)."""
    match = _SECONDS.match(text)
    if match is None:
        raise ValueError(f"not a duration: {text!r}")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return hours * 3600.0 + minutes * 60.0 + seconds


def duration_minutes(text: str) -> int:
    """Minutes of a ``4h``/``90m``/``1h30m`` duration (schema-checked before)."""
    return int(parse_duration(text) // 60)
