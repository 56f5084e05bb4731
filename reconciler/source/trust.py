"""Where the trusted keys of signed-commit verification are (:class:`TrustedKeys`), as a value.

A module of its own, so that a command taking the trusted-key options builds their value
without importing the verification itself (:mod:`reconciler.source.signatures`, which also
exports it): ``diff --base`` without ``--verify`` never loads it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class TrustedKeys:
    """Where the trusted keys are (paths, read at each verification) and whether every commit
    since the last accepted one must be signed, or the head alone."""

    ssh_signers: tuple[Path, ...] = ()
    openpgp_keys: tuple[Path, ...] = ()
    folders: tuple[Path, ...] = ()
    every_commit: bool = False
    #: A Kubernetes Secret of key files by name, as a folder's (``namespace/name``, shown) and
    #: how to read its data (at each verification; the cluster adapter's, wired by the CLI).
    secret: str = ""
    fetch_secret: Callable[[], Mapping[str, bytes]] | None = field(
        default=None, compare=False, repr=False
    )

    @property
    def configured(self) -> bool:
        """Whether any key source is given (verification is on)."""
        given = self.ssh_signers or self.openpgp_keys or self.folders
        return bool(given or self.fetch_secret is not None)

    def describe(self) -> str:
        """Where the keys come from, for the daemon's start line (paths only)."""
        parts = [f"ssh signers {p}" for p in self.ssh_signers]
        parts += [f"OpenPGP keys {p}" for p in self.openpgp_keys]
        parts += [f"keys folder {p}" for p in self.folders]
        parts += [f"Secret {self.secret}"] if self.fetch_secret is not None else []
        scope = "every commit since the last accepted one" if self.every_commit else "each head"
        return f"{scope}, trusting {', '.join(parts)}"
