"""A folder of a git commit as a read-only file tree, read with the ``git`` command (file I/O).

:class:`GitTree` is what :func:`reconciler.source.git.open_revision` and
:class:`~reconciler.source.git.RemoteSource` hand the loader: the config repo's folder at one
commit, read without a checkout and without gitpython's object walk (a revision of 1,000 runtimes
costs two calls to git: one ``ls-tree`` of the folder, one ``cat-file --batch`` of the blobs not
parsed already). A file's content id is its blob id, so a file unchanged between two revisions is
parsed once. Callers: the git source; ``diff --base`` through it.
"""

from __future__ import annotations

import contextlib
import fcntl
import posixpath
import subprocess
import time
import weakref
from collections.abc import Sequence, Set
from dataclasses import dataclass
from typing import IO

from reconciler.errors import SourceError, UnreadableError
from reconciler.source.tree import Entry

_LINK_MODE = 0o120000
_TREE = "tree"
#: A gitlink: a commit of another repository (a submodule), no files of this one.
_SUBMODULE = "commit"
#: The largest blob read ahead with the others, and all of them together (memory held at once).
PREFETCH_BLOB_BYTES = 1 << 20
PREFETCH_TOTAL_BYTES = 64 << 20
#: The longest symbolic link target read (Linux's PATH_MAX); a longer one leads nowhere.
_LINK_MAX_BYTES = 4096


@dataclass(frozen=True, slots=True)
class _Item:
    """One entry of a git tree: mode, type (``blob``, ``tree``, ``commit``), id, size (blobs)."""

    mode: int
    kind: str
    id: str
    size: int


class GitTree:
    """A folder of a commit's tree as a :class:`~reconciler.source.tree.SourceTree`.

    Paths are relative to ``prefix`` (the config repo's folder inside the git repository) and
    may climb out of it with ``..`` as long as they stay inside the repository. Every entry below
    ``prefix`` is listed at once, with the blobs' sizes from their headers (``git ls-tree -r -t
    -l``), before any file is read: the loader refuses a file over its size limit without reading
    it (a 2 GB blob of zeros is a few MB pushed). A folder elsewhere (channels in
    ``../channels``, a link's target) is listed when asked for. When the first file is read, the
    small ``*.yaml`` blobs below ``prefix`` are read with it, in one ``git cat-file --batch``, up
    to :data:`PREFETCH_BLOB_BYTES` each and :data:`PREFETCH_TOTAL_BYTES` in all, except those
    :meth:`read_ahead_except` names; any other file is read on its own, only when asked for.
    """

    def __init__(self, git_dir: str, commit: str, prefix: str) -> None:
        self._git_dir = git_dir
        self._commit = commit
        self._prefix = prefix
        #: The entries of each folder listed so far, by the folder's path in the repository.
        self._folders: dict[str, dict[str, _Item]] = {}
        self._data: dict[str, bytes] = {}
        #: The ``*.yaml`` blobs below ``prefix`` read together and not read since, by id.
        self._fetched: dict[str, bytes] | None = None
        #: Every blob below ``prefix`` (links aside): its size and whether it is ``*.yaml``, by id.
        self._below: dict[str, tuple[int, bool]] = {}
        #: Blob ids not read ahead: the reader has them parsed already (the other side's).
        self._skipped: frozenset[str] = frozenset()
        #: Seconds spent reading git objects (for ``--timings``).
        self.io_seconds = 0.0
        #: The listing of ``prefix`` started ahead (:meth:`list_ahead`), until it is taken.
        self._ahead: _Ahead | None = None

    def list_ahead(self) -> None:
        """Start listing everything below ``prefix`` now, in the background: git lists the
        folder while the caller does something else (``diff --base`` reads the head). The
        first question about the folder takes the listing; if git could not list it that way
        (``prefix`` is no folder at this commit), it is listed as usual, with the usual error."""
        if self._ahead is None and self._prefix not in self._folders:
            target = f"{self._commit}:{self._prefix}" if self._prefix else self._commit
            self._ahead = _Ahead(self._git_dir, _ls_tree(target, recursive=True))

    def read_ahead_except(self, ids: Set[str]) -> None:
        """Leave the blobs ``ids`` out of the batch read ahead (one still asked for is read on
        its own): a reader that has them parsed, by content id, never reads them."""
        self._skipped = frozenset(ids)

    def _full(self, path: str) -> str | None:
        joined = posixpath.normpath(posixpath.join(self._prefix, path)) if path else self._prefix
        if joined in ("", "."):
            return ""
        return None if joined.startswith(("..", "/")) else joined  # out of the repository

    def _node(self, path: str) -> _Item | None:
        full = self._full(path)
        return self._node_of_full(full) if full is not None else None

    def _listing(self, full: str) -> dict[str, _Item] | None:
        """The entries of the folder ``full`` of the repository; ``None`` when it is none."""
        known = self._folders.get(full)
        if known is not None:
            return known
        if self._ahead is not None:
            known = self._listed_ahead(full)
            if known is not None:
                return known
        node = self._node_of_full(full)
        if node is None or node.kind != _TREE:
            return None
        known = self._folders.get(full)  # listed with ``prefix`` meanwhile
        if known is not None:
            return known
        started = time.perf_counter()
        recursive = full == self._prefix  # the config repo: every entry below it, at once
        output = git_output(self._git_dir, _ls_tree(node.id, recursive=recursive))
        self._record(full, output, recursive=recursive)
        self.io_seconds += time.perf_counter() - started
        return self._folders[full]

    def _listed_ahead(self, full: str) -> dict[str, _Item] | None:
        """The listing started by :meth:`list_ahead`, when ``full`` is the folder it lists and
        git listed it."""
        ahead, self._ahead = self._ahead, None
        if ahead is None or full != self._prefix:
            self._ahead = ahead
            return None
        started = time.perf_counter()
        output = ahead.output()
        self.io_seconds += time.perf_counter() - started
        if output is None:
            return None
        self._record(full, output, recursive=True)
        return self._folders[full]

    def _record(self, full: str, output: bytes, *, recursive: bool) -> None:
        """Keep the entries of a listing of the folder ``full`` (recursive: all below it)."""
        self._folders[full] = {}
        for path, item in _parse_listing(output):
            at = posixpath.join(full, path) if full else path
            folder, _, name = at.rpartition("/")
            self._folders.setdefault(folder, {})[name] = item
            if not recursive:
                continue
            if item.kind == _TREE:  # listed whole: an empty one is known empty
                self._folders.setdefault(at, {})
            elif item.kind == "blob" and item.mode != _LINK_MODE:
                self._below[item.id] = (item.size, name.endswith(".yaml"))

    def _node_of_full(self, full: str) -> _Item | None:
        if not full:
            return _Item(0o040000, _TREE, self._commit, 0)
        parent, _, name = full.rpartition("/")
        listing = self._listing(parent)
        return listing.get(name) if listing is not None else None

    def entries(self, folder: str) -> list[Entry]:
        """See :class:`reconciler.source.tree.SourceTree`."""
        full = self._full(folder)
        listing = self._listing(full) if full is not None else None
        if listing is None:
            return []
        return [
            Entry(
                name,
                item.kind == _TREE or self._links_to_tree(folder, name, item),
                item.mode == _LINK_MODE,
                item.kind == _SUBMODULE,
            )
            for name, item in sorted(listing.items())
        ]

    def _links_to_tree(self, folder: str, name: str, item: _Item) -> bool:
        if item.mode != _LINK_MODE:
            return False
        target = self._node(self._link_target(posixpath.join(folder, name), item))
        return target is not None and target.kind == _TREE

    def _link_target(self, path: str, item: _Item) -> str:
        """Where the link ``item`` at ``path`` leads; a target longer than any real one is not
        read and leads out of the repository ("/")."""
        if item.size > _LINK_MAX_BYTES:  # the header only
            return "/"
        target = self._blob_data(item.id).decode("utf-8", "replace")
        return posixpath.normpath(posixpath.join(posixpath.dirname(path), target))

    def _blob(self, path: str) -> _Item | None:
        node = self._node(path)
        if node is not None and node.kind == "blob" and node.mode == _LINK_MODE:
            node = self._node(self._link_target(path, node))
        return node if node is not None and node.kind == "blob" else None

    def is_dir(self, path: str) -> bool:
        """See :class:`reconciler.source.tree.SourceTree`."""
        node = self._node(path)
        if node is not None and node.kind == "blob" and node.mode == _LINK_MODE:
            node = self._node(self._link_target(path, node))
        return node is not None and node.kind == _TREE

    def is_file(self, path: str) -> bool:
        """See :class:`reconciler.source.tree.SourceTree`."""
        return self._blob(path) is not None

    def size(self, path: str) -> int:
        """See :class:`reconciler.source.tree.SourceTree`: from the object's header, unread."""
        blob = self._blob(path)
        if blob is None:
            raise UnreadableError(f"{path}: not a file at this revision")
        return blob.size

    def read(self, path: str) -> bytes:
        """See :class:`reconciler.source.tree.SourceTree`."""
        cached = self._data.pop(path, None)
        if cached is not None:
            return cached
        blob = self._blob(path)
        if blob is None:
            raise UnreadableError(f"{path}: not a file at this revision")
        if self._fetched is None:
            self._fetched = self._read_yaml_blobs()
        fetched = self._fetched.pop(blob.id, None)
        data = fetched if fetched is not None else self._blob_data(blob.id)
        self._data.clear()
        self._data[path] = data  # size() then read() reads once
        return data

    def _blob_data(self, blob_id: str) -> bytes:
        started = time.perf_counter()
        data = _cat_file(self._git_dir, [blob_id]).get(blob_id)
        self.io_seconds += time.perf_counter() - started
        if data is None:
            raise UnreadableError(f"git object {blob_id} is missing")
        return data

    def _read_yaml_blobs(self) -> dict[str, bytes]:
        """The small ``*.yaml`` blobs below ``prefix`` (links aside, and those the reader has
        parsed), by id, within the limits of what is read ahead: one call to git."""
        self._listing(self._prefix)
        ids, total = [], 0
        for blob_id, (size, is_yaml) in sorted(self._below.items()):
            if blob_id in self._skipped:
                continue
            if is_yaml and size <= PREFETCH_BLOB_BYTES and total + size <= PREFETCH_TOTAL_BYTES:
                ids.append(blob_id)
                total += size
        if not ids:
            return {}
        started = time.perf_counter()
        found = _read_blobs(self._git_dir, ids)
        self.io_seconds += time.perf_counter() - started
        return found

    def escapes(self, path: str, boundary: str) -> bool:
        """See :class:`reconciler.source.tree.SourceTree`."""
        node = self._node(path)
        if node is None or node.mode != _LINK_MODE:
            return False
        target = self._full(self._link_target(path, node))
        inside = self._full(boundary)
        if target is None or inside is None:
            return True
        return not (inside == "" or target == inside or target.startswith(inside + "/"))

    def inside(self, path: str) -> bool:
        """See :class:`reconciler.source.tree.SourceTree`: inside this git repository."""
        return not path.startswith("/") and self._full(path) is not None

    def identity(self, path: str) -> str | None:
        """The blob id."""
        blob = self._blob(path)
        return blob.id if blob is not None else None


class _Ahead:
    """A git command started now, its output taken later: git works in its own process while
    this one goes on (its output waits in a pipe made as large as the system allows, so git
    rarely has to wait for the reader). ``None`` when it failed: the caller asks again the
    usual way, which reports the failure."""

    def __init__(self, git_dir: str, args: Sequence[str]) -> None:
        self._process: subprocess.Popen[bytes] | None
        try:
            self._process = subprocess.Popen(
                ["git", "--git-dir", git_dir, *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            self._process = None
            return
        _widen(self._process.stdout)
        # a listing nobody takes (the caller failed first) is ended with this object
        weakref.finalize(self, _end, self._process)

    def output(self) -> bytes | None:
        """The command's output, once it is done."""
        if self._process is None:
            return None
        output, _ = self._process.communicate()
        return output if self._process.returncode == 0 else None


def _end(process: subprocess.Popen[bytes]) -> None:
    """Close the pipe of a command whose output nobody took, stop it and reap it."""
    if process.stdout is not None:
        process.stdout.close()
    if process.poll() is None:
        process.kill()
    process.wait()


def _widen(pipe: IO[bytes] | None) -> None:
    """Make ``pipe`` as large as an unprivileged process may (Linux: 1 MiB by default)."""
    size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if pipe is None or size is None:
        return
    with contextlib.suppress(OSError):
        fcntl.fcntl(pipe.fileno(), size, _PIPE_BYTES)


#: The pipe size asked for (``/proc/sys/fs/pipe-max-size``'s default).
_PIPE_BYTES = 1 << 20


def _ls_tree(tree: str, *, recursive: bool) -> list[str]:
    return ["ls-tree", "-l", "-z", *(["-r", "-t"] if recursive else []), tree]


def _parse_listing(output: bytes) -> list[tuple[str, _Item]]:
    """``git ls-tree -l -z`` output as (path, item): ``<mode> <type> <id> <size>\\t<path>``."""
    found = []
    for entry in output.split(b"\0"):
        info, _, name = entry.partition(b"\t")
        fields = info.split()
        if len(fields) != 4:
            continue
        size = int(fields[3]) if fields[3] != b"-" else 0
        item = _Item(int(fields[0], 8), fields[1].decode(), fields[2].decode(), size)
        found.append((name.decode("utf-8", "surrogateescape"), item))
    return found


#: What a missing ``git`` command is told as (every read of a revision or a remote needs it).
NO_GIT = "the git command was not found: install git, or put it on PATH"


def run_git(arguments: Sequence[str], given: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """``git ARGUMENTS`` with ``given`` on its input and its output captured; a missing git is
    a :class:`~reconciler.errors.SourceError` saying so."""
    try:
        return subprocess.run(["git", *arguments], input=given, capture_output=True, check=False)
    except FileNotFoundError as error:
        raise SourceError(NO_GIT) from error


def git_output(git_dir: str, args: Sequence[str], given: bytes = b"") -> bytes:
    """The output of a local git command on the repository at ``git_dir`` (no remote)."""
    done = run_git(["--git-dir", git_dir, *args], given)
    if done.returncode != 0:
        message = git_reason(done.stderr)
        raise UnreadableError(f"git {args[0]} failed: {message}")
    return done.stdout


def _read_blobs(git_dir: str, ids: Sequence[str]) -> dict[str, bytes]:
    """The blobs read ahead, in one call (tests count these batches)."""
    return _cat_file(git_dir, ids)


def _cat_file(git_dir: str, ids: Sequence[str]) -> dict[str, bytes]:
    """The contents of the blobs ``ids`` of the local repository at ``git_dir``, in one call."""
    given = "".join(f"{blob_id}\n" for blob_id in ids).encode()
    output = git_output(git_dir, ["cat-file", "--batch"], given)
    found: dict[str, bytes] = {}
    at = 0
    while at < len(output):
        end = output.index(b"\n", at)
        header = output[at:end].split()
        at = end + 1
        if len(header) != 3:  # "<id> missing": read one by one later
            continue
        size = int(header[2])
        found[header[0].decode()] = output[at : at + size]
        at += size + 1
    return found


def git_reason(errors: bytes) -> str:
    """What git said on standard error, whole, on one line: its ``fatal:`` and ``error:``
    lines when there are any (the advice after them is git's, not ours), else every line.
    Never cut: the last line alone was half a sentence ('and the repository exists.')."""
    lines = [line.strip() for line in errors.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line]
    said = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return "; ".join(said) if said else " ".join(lines)
