"""Which ``.Capabilities`` the charts of a command's runtimes render with, read from the state
store, and the one line that says so. Used by ``validate``, ``diff`` (``--snapshot``, live and
``--base``) and ``sync`` when they read the repo; a sync on real clusters reads each cluster
itself (``reconciler.operations.capabilities``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import click

from reconciler.core.model import ConfigRepo
from reconciler.core.templates import DEFAULT_KUBE_VERSION, Capabilities, gets_a_chart

#: How many runtimes a line names before it counts the rest.
NAMED = 3


class RecordedCapabilities(Mapping[str, Capabilities]):
    """What the last syncs recorded of each runtime's cluster in the store ``state_url``, read
    at the first question (a repo without charts never asks: its command imports no store);
    nothing where no store exists (a read: never creates one)."""

    def __init__(self, state_url: str) -> None:
        self.state_url = state_url
        self._read: dict[str, Capabilities] | None = None

    def _recorded(self) -> dict[str, Capabilities]:
        if self._read is None:
            self._read = load_recorded_capabilities(self.state_url)
        return self._read

    def __getitem__(self, runtime: str) -> Capabilities:
        return self._recorded()[runtime]

    def __iter__(self) -> Iterator[str]:
        return iter(self._recorded())

    def __len__(self) -> int:
        return len(self._recorded())


def load_recorded_capabilities(state_url: str) -> dict[str, Capabilities]:
    """What the last syncs recorded of each runtime's cluster; none where no store exists (a
    read: never creates one; a SQLite file that is not there is seen without the store's
    code)."""
    sqlite = "sqlite:///"
    if not state_url:
        return {}
    if state_url.startswith(sqlite) and not Path(state_url[len(sqlite) :]).expanduser().exists():
        return {}
    from reconciler.operations.store import open_existing_store

    store = open_existing_store(state_url)
    return store.capabilities() if store is not None else {}


def capabilities_line(
    repo: ConfigRepo, recorded: Mapping[str, Capabilities], runtimes: Iterable[str] = ()
) -> str | None:
    """One line naming which runtimes' charts render with their cluster's recorded
    capabilities and which with the engine's defaults; ``None`` when none of ``runtimes``
    (default: all) gets a chart."""
    wanted = list(runtimes) or list(repo.runtimes)
    charted = [r for r in wanted if r in repo.runtimes and gets_a_chart(repo, r)]
    if not charted:
        return None
    known = [r for r in charted if r in recorded]
    default = [r for r in charted if r not in recorded]
    parts = []
    if known:
        parts.append(f"{_names(known)}: as the last sync recorded {_versions(known, recorded)}")
    if default:
        parts.append(
            f"{_names(default)}: the engine default (Kubernetes {DEFAULT_KUBE_VERSION}: no sync "
            "recorded their clusters)"
        )
    return "chart .Capabilities: " + "; ".join(parts)


def say_capabilities(
    repo: ConfigRepo, recorded: Mapping[str, Capabilities], runtimes: Iterable[str] = ()
) -> None:
    """:func:`capabilities_line` on stderr, when there is one."""
    line = capabilities_line(repo, recorded, runtimes)
    if line is not None:
        click.echo(line, err=True)


def _names(runtimes: list[str]) -> str:
    shown = ", ".join(runtimes[:NAMED])
    return shown + (f" and {len(runtimes) - NAMED} more" if len(runtimes) > NAMED else "")


def _versions(runtimes: list[str], recorded: Mapping[str, Capabilities]) -> str:
    """``their clusters (Kubernetes v1.31.0, 57 API versions, 2026-12-07 21:00 UTC)``."""
    described = sorted({_described(recorded[r]) for r in runtimes})
    return "their clusters (" + "; ".join(described) + ")"


def _described(capabilities: Capabilities) -> str:
    when = capabilities.recorded.strftime(" at %Y-%m-%d %H:%M UTC") if capabilities.recorded else ""
    count = len(capabilities.api_versions)
    return f"Kubernetes {capabilities.kube_version}, {count} API versions{when}"
