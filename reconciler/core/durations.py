"""Durations as written in the config repo and on the command line: ``24h``, ``90m``, ``1h30m``,
``45s`` (pure).
"""

from __future__ import annotations

import re
from datetime import timedelta

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


def duration_text(span: timedelta) -> str:
    """``1h 5m``, ``4m 10s``, ``30s`` (whole seconds; ``0s`` for none): a duration for people."""
    seconds = max(int(span.total_seconds()), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else ""]
    if seconds or not (hours or minutes):
        parts.append(f"{seconds}s")
    return " ".join(p for p in parts if p)
