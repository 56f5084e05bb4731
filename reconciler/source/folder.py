"""A folder on disk as a :class:`~reconciler.source.tree.SourceTree` (file I/O).

What ``reconciler validate DIR`` and every other command given a folder read: entries sorted by
name, links judged against the repository that holds the folder (C6), a file's content named
by the id git would give it (so a working-tree file unchanged since a revision is parsed once),
and one line naming the path for anything this user may not read.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

from reconciler.errors import UnreadableError
from reconciler.source.tree import Entry

#: What ``is_file`` answers "no" to, as :meth:`pathlib.Path.is_file` does.
_MISSING = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})


class FolderTree:
    """A folder on disk as a :class:`~reconciler.source.tree.SourceTree`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._root = str(root)
        self._last: tuple[str, bytes] | None = None
        self._resolved: dict[str, str] = {}
        self._boundary: str | None = None
        #: Paths that were no symbolic link when their folder was listed (no need to ask again).
        self._not_links: set[str] = set()

    def _path(self, path: str) -> Path:
        return self.root / path if path else self.root

    def _str(self, path: str) -> str:
        """``path`` on disk as a string (pathlib's joins cost more than reading a small file)."""
        if not path:
            return self._root
        return f"{self._root}/{path}" if path[0] != "/" else os.path.join(self._root, path)

    def entries(self, folder: str) -> list[Entry]:
        """See :class:`reconciler.source.tree.SourceTree`."""
        try:
            with os.scandir(self._path(folder)) as found:
                entries = sorted(
                    (Entry(e.name, e.is_dir(), e.is_symlink()) for e in found),
                    key=lambda e: e.name,
                )
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as error:  # a folder this user may not read: one line, never a crash
            raise self._unreadable(folder, error) from error
        prefix = f"{folder}/" if folder else ""
        self._not_links.update(prefix + e.name for e in entries if not e.is_link)
        return entries

    def is_dir(self, path: str) -> bool:
        """See :class:`reconciler.source.tree.SourceTree`."""
        try:
            return self._path(path).is_dir()
        except OSError as error:
            raise self._unreadable(path, error) from error

    def is_file(self, path: str) -> bool:
        """See :class:`reconciler.source.tree.SourceTree`."""
        try:
            return stat.S_ISREG(os.stat(self._str(path)).st_mode)
        except OSError as error:  # missing is "no"; unreadable is said, as pathlib would
            if error.errno in _MISSING:
                return False
            raise self._unreadable(path, error) from error

    def _unreadable(self, path: str, error: OSError) -> UnreadableError:
        """``<path>: cannot be read (Permission denied); check ...``, for a folder or file the
        operator must make readable."""
        reason = error.strerror or type(error).__name__
        return UnreadableError(
            f"{self._path(path)}: cannot be read ({reason}); check that this user may read "
            "it and the folders above it"
        )

    def size(self, path: str) -> int:
        """See :class:`reconciler.source.tree.SourceTree`; a FIFO or device is refused, not read."""
        status = os.stat(self._str(path))
        if not stat.S_ISREG(status.st_mode):
            raise UnreadableError("not a regular file")
        return status.st_size

    def read(self, path: str) -> bytes:
        """See :class:`reconciler.source.tree.SourceTree`."""
        if self._last is not None and self._last[0] == path:
            return self._last[1]
        try:
            with open(self._str(path), "rb") as file:
                data = file.read()
        except OSError as error:
            raise UnreadableError(error.strerror or type(error).__name__) from error
        self._last = (path, data)
        return data

    def escapes(self, path: str, boundary: str) -> bool:
        """See :class:`reconciler.source.tree.SourceTree`; a link anywhere on the way counts (a
        linked
        ``runtimes/`` folder too)."""
        inside = self._real(boundary)
        parent, _, name = path.rpartition("/")
        full = os.path.join(self._real(parent), name)  # folders resolved once each
        link = path not in self._not_links and os.path.islink(full)
        real = os.path.realpath(full) if link else full
        return not (real == inside or real.startswith(inside + os.sep))

    def _real(self, folder: str) -> str:
        real = self._resolved.get(folder)
        if real is None:
            real = self._resolved[folder] = os.path.realpath(self._path(folder))
        return real

    def inside(self, path: str) -> bool:
        """See :class:`reconciler.source.tree.SourceTree`: inside the git repository holding the
        folder, found by its ``.git``; outside any, inside the folder's parent (channels kept
        beside the repo, as in a copy of a project without its ``.git``)."""
        if os.path.isabs(path):
            return False
        if self._boundary is None:
            self._boundary = _enclosing_repository(os.path.realpath(self.root))
        real = os.path.realpath(self._path(path))
        return os.path.commonpath([real, self._boundary]) == self._boundary

    def identity(self, path: str) -> str | None:
        """The id git would give the file's content (so a working tree file unchanged since a
        revision is not parsed again), or ``None`` when it cannot be read."""
        try:
            data = self.read(path)
        except UnreadableError:
            return None
        return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _enclosing_repository(folder: str) -> str:
    """The top of the git repository holding ``folder``, or its parent when in none."""
    for candidate in (folder, *map(str, Path(folder).parents)):
        if os.path.lexists(os.path.join(candidate, ".git")):
            return candidate
    return os.path.dirname(folder)
