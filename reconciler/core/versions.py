"""Semantic versions of modules: parsing and ordering (pure).

Wraps the ``semver`` library so that the rest of the code compares versions one way. Callers: the
validator (version folders, pins, channels), the resolver and the planner (no downgrade).

Versions from git must be exact semantic versions. A version read from a cluster (the operator's
``app.kubernetes.io/version`` label, an inventory) is not ours to fix: :func:`parse_running_version`
also accepts a leading ``v`` (``v1.2.3`` is 1.2.3, as many upstream charts label it) and gives
``None`` for anything else, which the planner reports instead of guessing.
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


def parse_running_version(value: object) -> semver.Version | None:
    """A version read from a cluster: a semantic version with or without one leading ``v``;
    ``None`` for anything else (``latest``, ``1.0``, empty, a number)."""
    if not isinstance(value, str):
        return None
    return parse_version(value[1:] if value.startswith("v") else value)


def version_key(text: str) -> semver.Version:
    """A sort key for a valid version string; raises ``ValueError`` for an invalid one."""
    version = parse_version(text)
    if version is None:
        raise ValueError(f"not a semantic version: {text!r}")
    return version


def sorted_versions(texts: list[str]) -> list[str]:
    """Valid versions, lowest first."""
    return sorted(texts, key=version_key)
