"""Semantic versions of modules: parsing and ordering (pure).

Wraps the ``semver`` library so that the rest of the code compares versions one way. Callers: the
validator (version folders, pins, channels), the resolver and, later, the planner (no downgrade).
"""

from __future__ import annotations

from functools import lru_cache

import semver


@lru_cache(maxsize=4096)
def parse_version(text: str) -> semver.Version | None:
    """The version ``text`` names, or ``None`` when it is not a semantic version."""
    try:
        return semver.Version.parse(text)
    except (ValueError, TypeError):
        return None


def is_version(text: str) -> bool:
    """Whether ``text`` is a semantic version (``1.2.3``, ``1.2.3-rc.1``, ``1.2.3+build``)."""
    return parse_version(text) is not None


def version_key(text: str) -> semver.Version:
    """A sort key for a valid version string; raises ``ValueError`` for an invalid one."""
    version = parse_version(text)
    if version is None:
        raise ValueError(f"not a semantic version: {text!r}")
    return version


def sorted_versions(texts: list[str]) -> list[str]:
    """Valid versions, lowest first."""
    return sorted(texts, key=version_key)
