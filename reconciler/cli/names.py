"""Runtime names a command is given, checked before it acts: a name that is neither in the
config repo nor in the state store is refused (exit 2) with the closest known name, so a typo
never suspends, resumes or shows nothing while the real runtime goes on. Callers: ``suspend``,
``resume``, ``status``, ``tree``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from reconciler.core.diagnostics import did_you_mean
from reconciler.errors import NotFoundError


def repo_runtime_names(repo: Path | None) -> set[str]:
    """The runtime names of the config repo at ``repo`` (its ``runtimes/*.yaml`` file names,
    which C4 makes their names; nothing is parsed); none when it has no ``runtimes/``."""
    if repo is None:
        return set()
    try:
        return {p.stem for p in (repo / "runtimes").glob("*.yaml")}
    except OSError:
        return set()


def unknown_runtime(name: str, known: Iterable[str], where: str) -> NotFoundError:
    """``runtime 'prod-eu1' is not in <where>; did you mean 'prod-eu-1'?``."""
    return NotFoundError(f"runtime '{name}' is not in {where}" + did_you_mean(name, known))


def check_runtime(name: str, known: Iterable[str], where: str) -> None:
    """Refuse ``name`` unless it is one of ``known`` (:func:`unknown_runtime`)."""
    names = set(known)
    if name not in names:
        raise unknown_runtime(name, names, where)
