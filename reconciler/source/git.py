"""Git revisions as read-only file trees (gitpython); the only module that imports ``git``.

:func:`open_revision` finds the git repository that holds a config repo folder and returns a
:class:`GitTree` of that folder at a revision (a branch, tag, commit or expression such as
``HEAD~1``), so the loader reads a revision exactly as it reads a folder, without a checkout.
A file's content id is its blob id, so a file unchanged between two revisions is parsed once.
gitpython's exceptions are translated here into :class:`~reconciler.errors.SourceError`.
Callers: ``reconciler diff --base``; later the daemon's git source.
"""

from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
from gitdb.exc import BadName, BadObject

from reconciler.errors import SourceError, UnreadableError
from reconciler.tree import Entry

_LINK_MODE = 0o120000
_TREE = "tree"


@dataclass(frozen=True, slots=True)
class Revision:
    """A resolved revision: the tree to read, the commit id and how to name it."""

    tree: GitTree
    commit: str
    label: str

    @property
    def short(self) -> str:
        """The abbreviated commit id."""
        return self.commit[:8]


class GitTree:
    """A folder of a commit's tree as a :class:`~reconciler.tree.SourceTree`.

    Paths are relative to ``prefix`` (the config repo's folder inside the git repository) and
    may climb out of it with ``..`` as long as they stay inside the repository.
    """

    def __init__(self, root: Any, prefix: str) -> None:
        self._root = root
        self._prefix = prefix
        self._children: dict[str, dict[str, Any]] = {}
        self._data: dict[str, bytes] = {}
        #: Seconds spent reading git objects (for ``--timings``).
        self.io_seconds = 0.0

    def _full(self, path: str) -> str | None:
        joined = posixpath.normpath(posixpath.join(self._prefix, path)) if path else self._prefix
        if joined in ("", "."):
            return ""
        return None if joined.startswith("..") else joined

    def _node(self, path: str) -> Any | None:
        full = self._full(path)
        if full is None:
            return None
        node = self._root
        for part in full.split("/") if full else ():
            if node.type != _TREE:
                return None
            node = self._listing(node).get(part)
            if node is None:
                return None
        return node

    def _listing(self, tree: Any) -> dict[str, Any]:
        listing = self._children.get(tree.hexsha)
        if listing is None:
            started = time.perf_counter()
            listing = self._children[tree.hexsha] = {item.name: item for item in tree}
            self.io_seconds += time.perf_counter() - started
        return listing

    def entries(self, folder: str) -> list[Entry]:
        """See :class:`reconciler.tree.SourceTree`."""
        node = self._node(folder)
        if node is None or node.type != _TREE:
            return []
        return [
            Entry(
                name,
                item.type == _TREE or self._links_to_tree(folder, name, item),
                item.mode == _LINK_MODE,
            )
            for name, item in sorted(self._listing(node).items())
        ]

    def _links_to_tree(self, folder: str, name: str, item: Any) -> bool:
        if item.mode != _LINK_MODE:
            return False
        target = self._node(self._link_target(posixpath.join(folder, name), item))
        return target is not None and target.type == _TREE

    def _link_target(self, path: str, item: Any) -> str:
        target = item.data_stream.read().decode("utf-8", "replace")
        return posixpath.normpath(posixpath.join(posixpath.dirname(path), target))

    def _blob(self, path: str) -> Any | None:
        node = self._node(path)
        if node is not None and node.type == "blob" and node.mode == _LINK_MODE:
            node = self._node(self._link_target(path, node))
        return node if node is not None and node.type == "blob" else None

    def is_dir(self, path: str) -> bool:
        """See :class:`reconciler.tree.SourceTree`."""
        node = self._node(path)
        if node is not None and node.type == "blob" and node.mode == _LINK_MODE:
            node = self._node(self._link_target(path, node))
        return node is not None and node.type == _TREE

    def is_file(self, path: str) -> bool:
        """See :class:`reconciler.tree.SourceTree`."""
        return self._blob(path) is not None

    def size(self, path: str) -> int:
        """See :class:`reconciler.tree.SourceTree`."""
        return len(self.read(path))

    def read(self, path: str) -> bytes:
        """See :class:`reconciler.tree.SourceTree`."""
        cached = self._data.pop(path, None)
        if cached is not None:
            return cached
        blob = self._blob(path)
        if blob is None:
            raise UnreadableError(f"{path}: not a file at this revision")
        started = time.perf_counter()
        data: bytes = blob.data_stream.read()
        self.io_seconds += time.perf_counter() - started
        self._data.clear()
        self._data[path] = data  # size() then read() reads once
        return data

    def escapes(self, path: str, boundary: str) -> bool:
        """See :class:`reconciler.tree.SourceTree`."""
        node = self._node(path)
        if node is None or node.mode != _LINK_MODE:
            return False
        target = self._full(self._link_target(path, node))
        inside = self._full(boundary)
        if target is None or inside is None:
            return True
        return not (inside == "" or target == inside or target.startswith(inside + "/"))

    def identity(self, path: str) -> str | None:
        """The blob id."""
        blob = self._blob(path)
        return str(blob.hexsha) if blob is not None else None


def open_revision(folder: Path, revision: str) -> Revision:
    """The config repo at ``folder`` as it is at ``revision`` of the git repository holding it."""
    try:
        repository = git.Repo(folder, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as error:
        raise SourceError(f"{folder}: not inside a git repository") from error
    top = repository.working_tree_dir
    if top is None:
        raise SourceError(f"{folder}: the git repository has no working tree")
    prefix = Path(folder).resolve().relative_to(Path(top).resolve()).as_posix()
    try:
        commit = repository.commit(revision)
    except (BadName, BadObject, ValueError, git.GitCommandError) as error:
        raise SourceError(f"unknown revision '{revision}' in {top}") from error
    tree = GitTree(commit.tree, "" if prefix == "." else prefix)
    return Revision(tree, str(commit.hexsha), revision)
