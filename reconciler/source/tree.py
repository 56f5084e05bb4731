"""Read-only file trees the loader walks: a folder on disk, or a git revision (pure).

Paths are POSIX paths relative to the tree's root (the config repo's folder); they may climb out
of it with ``..`` (channels kept beside the repo) when the tree can serve that. ``identity`` names
a file's content (a git blob id) so that a file unchanged between two revisions is parsed once.
Callers: the loader. Implementations: :class:`reconciler.source.folder.FolderTree` and
:class:`reconciler.source.git.GitTree`; :class:`SubTree` shows a folder of either as a tree
of its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a folder."""

    name: str
    is_dir: bool
    is_link: bool = False
    #: A git submodule (a gitlink): a commit id of another repository, no files of this one.
    is_submodule: bool = False


class SourceTree(Protocol):
    """A tree of files, read-only."""

    def entries(self, folder: str) -> list[Entry]:
        """The entries of ``folder``, sorted by name; empty when it does not exist."""

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a folder."""

    def is_file(self, path: str) -> bool:
        """Whether ``path`` is a file (or a link to one)."""

    def size(self, path: str) -> int:
        """Size of a file in bytes."""

    def read(self, path: str) -> bytes:
        """The bytes of a file; raises :class:`~reconciler.errors.UnreadableError`."""

    def escapes(self, path: str, boundary: str) -> bool:
        """Whether ``path`` is a symbolic link that leads out of the folder ``boundary``."""

    def identity(self, path: str) -> str | None:
        """An id of the file's content (equal ids, equal bytes), or ``None`` when unknown."""

    def inside(self, path: str) -> bool:
        """Whether the folder ``path`` (relative; it may climb with ``..``) stays inside the
        repository holding the tree: its git repository (links followed), or for a folder in
        none, the folder beside which it lies (C6: ``channelsFrom.path``)."""


class SubTree:
    """A folder of another tree, seen as a tree of its own (the channels folder)."""

    def __init__(self, tree: SourceTree, folder: str) -> None:
        self.tree = tree
        self.folder = folder

    def _path(self, path: str) -> str:
        return (
            os.path.normpath(f"{self.folder}/{path}" if self.folder else path)
            if path
            else self.folder
        )

    def entries(self, folder: str) -> list[Entry]:
        return self.tree.entries(self._path(folder))

    def is_dir(self, path: str) -> bool:
        return self.tree.is_dir(self._path(path))

    def is_file(self, path: str) -> bool:
        return self.tree.is_file(self._path(path))

    def size(self, path: str) -> int:
        return self.tree.size(self._path(path))

    def read(self, path: str) -> bytes:
        return self.tree.read(self._path(path))

    def escapes(self, path: str, boundary: str) -> bool:
        # a channels folder inside the repo may link anywhere inside the repo
        inside = "" if not boundary and not self.folder.startswith("..") else self._path(boundary)
        return self.tree.escapes(self._path(path), inside)

    def identity(self, path: str) -> str | None:
        return self.tree.identity(self._path(path))

    def inside(self, path: str) -> bool:
        return not os.path.isabs(path) and self.tree.inside(self._path(path))
