"""Git revisions as read-only file trees (gitpython); the only module that imports ``git``.

:func:`open_revision` finds the git repository that holds a config repo folder and returns a
:class:`GitTree` of that folder at a revision (a branch, tag, commit or expression such as
``HEAD~1``), so the loader reads a revision exactly as it reads a folder, without a checkout.
A file's content id is its blob id, so a file unchanged between two revisions is parsed once.
gitpython's exceptions are translated here into :class:`~reconciler.errors.SourceError`.

:class:`RemoteSource` follows a ref of a remote (the daemon's config repo, a ``channelsFrom.git``
repository); every git call that reaches a remote runs through a :class:`GitRunner`: the remote
after ``--``, only the transports :mod:`reconciler.config.remotes` allows, a time limit, and a
process
group that shutdown kills. Callers: ``reconciler diff --base``, the daemon, ``validate``.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git
from gitdb.exc import BadName, BadObject

from reconciler.config.remotes import (
    CredentialHost,
    allowed_protocols,
    credential_origin,
    is_local,
    may_get_credentials,
    ref_problem,
    remote_problem,
)
from reconciler.errors import SourceError, TransientError, UnreadableError
from reconciler.source.tree import Entry

_LINK_MODE = 0o120000
_TREE = "tree"
_SUBMODULE = "submodule"
#: The largest blob read ahead with the others, and all of them together (memory held at once).
PREFETCH_BLOB_BYTES = 1 << 20
PREFETCH_TOTAL_BYTES = 64 << 20
#: The longest symbolic link target read (Linux's PATH_MAX); a longer one leads nowhere.
_LINK_MAX_BYTES = 4096


@dataclass(frozen=True, slots=True)
class Revision:
    """A resolved revision: the tree to read, the commit id and how to name it."""

    tree: GitTree
    commit: str
    label: str
    #: The git repository holding the commit (its signature is checked there).
    git_dir: Path | None = None

    @property
    def short(self) -> str:
        """The abbreviated commit id."""
        return self.commit[:8]


class GitTree:
    """A folder of a commit's tree as a :class:`~reconciler.source.tree.SourceTree`.

    Paths are relative to ``prefix`` (the config repo's folder inside the git repository) and
    may climb out of it with ``..`` as long as they stay inside the repository. Sizes come from
    the object headers, for every file below ``prefix`` at once (``git ls-tree -r -l``), before
    any file is read: the loader refuses a file over its size limit without reading it (a 2 GB
    blob of zeros is a few MB pushed). When the first file is read, the small ``*.yaml`` blobs
    below ``prefix`` are read with it, in one ``git cat-file --batch`` (a repo of 1,000 runtimes
    costs two calls to git, not a round trip per file), up to :data:`PREFETCH_BLOB_BYTES` each
    and :data:`PREFETCH_TOTAL_BYTES` in all; any other file (larger, or elsewhere: channels in
    ``../channels``) is read on its own, only when asked for.
    """

    def __init__(self, root: Any, prefix: str) -> None:
        self._root = root
        self._prefix = prefix
        self._children: dict[str, dict[str, Any]] = {}
        self._data: dict[str, bytes] = {}
        #: The ``*.yaml`` blobs below ``prefix`` read together and not read since, by id.
        self._fetched: dict[str, bytes] | None = None
        #: Every blob below ``prefix`` (links aside): its size and whether it is ``*.yaml``, by id.
        self._blobs: dict[str, tuple[int, bool]] | None = None
        #: Seconds spent reading git objects (for ``--timings``).
        self.io_seconds = 0.0

    def _full(self, path: str) -> str | None:
        joined = posixpath.normpath(posixpath.join(self._prefix, path)) if path else self._prefix
        if joined in ("", "."):
            return ""
        return None if joined.startswith(("..", "/")) else joined  # out of the repository

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
            # the name from the path: a submodule's own ``name`` needs a .gitmodules entry
            listing = {posixpath.basename(item.path): item for item in tree}
            self._children[tree.hexsha] = listing
            self.io_seconds += time.perf_counter() - started
        return listing

    def entries(self, folder: str) -> list[Entry]:
        """See :class:`reconciler.source.tree.SourceTree`."""
        node = self._node(folder)
        if node is None or node.type != _TREE:
            return []
        return [
            Entry(
                name,
                item.type == _TREE or self._links_to_tree(folder, name, item),
                item.mode == _LINK_MODE,
                item.type == _SUBMODULE,
            )
            for name, item in sorted(self._listing(node).items())
        ]

    def _links_to_tree(self, folder: str, name: str, item: Any) -> bool:
        if item.mode != _LINK_MODE:
            return False
        target = self._node(self._link_target(posixpath.join(folder, name), item))
        return target is not None and target.type == _TREE

    def _link_target(self, path: str, item: Any) -> str:
        """Where the link ``item`` at ``path`` leads; a target longer than any real one is not
        read and leads out of the repository ("/")."""
        if int(item.size) > _LINK_MAX_BYTES:  # gitpython: the header only
            return "/"
        target = item.data_stream.read().decode("utf-8", "replace")
        return posixpath.normpath(posixpath.join(posixpath.dirname(path), target))

    def _blob(self, path: str) -> Any | None:
        node = self._node(path)
        if node is not None and node.type == "blob" and node.mode == _LINK_MODE:
            node = self._node(self._link_target(path, node))
        return node if node is not None and node.type == "blob" else None

    def is_dir(self, path: str) -> bool:
        """See :class:`reconciler.source.tree.SourceTree`."""
        node = self._node(path)
        if node is not None and node.type == "blob" and node.mode == _LINK_MODE:
            node = self._node(self._link_target(path, node))
        return node is not None and node.type == _TREE

    def is_file(self, path: str) -> bool:
        """See :class:`reconciler.source.tree.SourceTree`."""
        return self._blob(path) is not None

    def size(self, path: str) -> int:
        """See :class:`reconciler.source.tree.SourceTree`: from the object's header, unread."""
        blob = self._blob(path)
        if blob is None:
            raise UnreadableError(f"{path}: not a file at this revision")
        known = self._blob_listing().get(str(blob.hexsha))
        return known[0] if known is not None else int(blob.size)  # gitpython: header only

    def read(self, path: str) -> bytes:
        """See :class:`reconciler.source.tree.SourceTree`."""
        cached = self._data.pop(path, None)
        if cached is not None:
            return cached
        blob = self._blob(path)
        if blob is None:
            raise UnreadableError(f"{path}: not a file at this revision")
        started = time.perf_counter()
        if self._fetched is None:
            self._fetched = self._read_yaml_blobs()
        fetched = self._fetched.pop(blob.hexsha, None)
        data: bytes = fetched if fetched is not None else blob.data_stream.read()
        self.io_seconds += time.perf_counter() - started
        self._data.clear()
        self._data[path] = data  # size() then read() reads once
        return data

    def _read_yaml_blobs(self) -> dict[str, bytes]:
        """The small ``*.yaml`` blobs below ``prefix`` (links aside), by id, within the limits of
        what is read ahead: one call to git."""
        ids, total = [], 0
        for blob_id, (size, is_yaml) in sorted(self._blob_listing().items()):
            if is_yaml and size <= PREFETCH_BLOB_BYTES and total + size <= PREFETCH_TOTAL_BYTES:
                ids.append(blob_id)
                total += size
        git_dir = str(self._root.repo.git_dir)
        return _read_blobs(git_dir, ids) if ids else {}

    def _blob_listing(self) -> dict[str, tuple[int, bool]]:
        """Every blob below ``prefix`` (links aside) with its size, by id: one call to git,
        which reads the objects' headers only."""
        if self._blobs is not None:
            return self._blobs
        self._blobs = {}
        top = self._node("")
        if top is None or top.type != _TREE:
            return self._blobs
        started = time.perf_counter()
        git_dir = str(self._root.repo.git_dir)
        listing = _git_output(git_dir, ["ls-tree", "-r", "-l", "-z", str(top.hexsha)])
        for entry in listing.split(b"\0"):
            info, _, name = entry.partition(b"\t")
            fields = info.split()  # mode, type, id, size
            if len(fields) == 4 and fields[1] == b"blob" and int(fields[0], 8) != _LINK_MODE:
                self._blobs[fields[2].decode()] = (int(fields[3]), name.endswith(b".yaml"))
        self.io_seconds += time.perf_counter() - started
        return self._blobs

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
        return str(blob.hexsha) if blob is not None else None


def _git_output(git_dir: str, args: Sequence[str], given: bytes = b"") -> bytes:
    """The output of a local git command on the repository at ``git_dir`` (no remote)."""
    done = subprocess.run(
        ["git", "--git-dir", git_dir, *args], input=given, capture_output=True, check=False
    )
    if done.returncode != 0:
        message = git_reason(done.stderr)
        raise UnreadableError(f"git {args[0]} failed: {message}")
    return done.stdout


def _read_blobs(git_dir: str, ids: Sequence[str]) -> dict[str, bytes]:
    """The contents of the blobs ``ids`` of the local repository at ``git_dir``, in one call."""
    given = "".join(f"{blob_id}\n" for blob_id in ids).encode()
    output = _git_output(git_dir, ["cat-file", "--batch"], given)
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
    return Revision(tree, str(commit.hexsha), revision, Path(repository.git_dir))


#: Blobs larger than this are streamed to disk by a fetch (``core.bigFileThreshold``, 512 MiB
#: by default), not held whole in git's memory: a blob of zeros costs a few MB to push.
STREAM_BLOB_BYTES = 1 << 20

#: How long one git call to a remote may take unless told otherwise (``--git-timeout``).
DEFAULT_GIT_TIMEOUT = 60.0


class GitRunner:
    """Runs git commands that reach a remote: each in its own process group, killed (with
    every child: ssh, the https helper) when it outlives ``timeout`` seconds or when
    :meth:`stop` is called, limited to the transports the remote may use (``-c
    protocol.allow=never`` plus ``GIT_ALLOW_PROTOCOL``, which also binds redirects and
    submodules). One runner is shared by the sources of a process, so shutdown stops them all.
    """

    def __init__(self, timeout: float = DEFAULT_GIT_TIMEOUT) -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[bytes]] = set()
        self._stopped = False

    def run(
        self,
        args: Sequence[str],
        *,
        git_dir: Path,
        shown: str,
        protocols: Sequence[str],
        env: Mapping[str, str],
    ) -> str:
        """git ``args`` in the repository ``git_dir``; its output, or a
        :class:`~reconciler.errors.TransientError` naming ``shown`` (the remote without
        credentials) when git fails, outlives its limit or is stopped."""
        command = [
            "git",
            "--git-dir",
            str(git_dir),
            *_protocol_options(protocols),
            *("-c", f"core.bigFileThreshold={STREAM_BLOB_BYTES}"),
            *args,
        ]
        environment = {
            **os.environ,
            **env,
            "GIT_ALLOW_PROTOCOL": ":".join(protocols),
            "GIT_TERMINAL_PROMPT": "0",
        }
        with self._lock:
            if self._stopped:
                raise TransientError(f"{shown}: git {args[0]} not started: shutting down")
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=environment,
                start_new_session=True,  # one process group: killed with its children
            )
            self._running.add(process)
        try:
            output, errors = self._wait(process, args[0], shown)
        finally:
            with self._lock:
                self._running.discard(process)
        if process.returncode != 0:
            if self._stopped:
                raise TransientError(f"{shown}: git {args[0]} stopped: shutting down")
            reason = redact(git_reason(errors) or f"exit status {process.returncode}")
            raise TransientError(f"{shown}: git {args[0]} failed: {reason}", retry_after=30.0)
        return output.decode("utf-8", "replace")

    def _wait(self, process: subprocess.Popen[bytes], name: str, shown: str) -> tuple[bytes, bytes]:
        try:
            return process.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            process.communicate()
            raise TransientError(
                f"{shown}: git {name} gave no answer within {self.timeout:g}s (git timeout); "
                "stopped it",
                retry_after=30.0,
            ) from None

    def stop(self) -> None:
        """Kill every running git call and refuse new ones (shutdown)."""
        with self._lock:
            self._stopped = True
            running = list(self._running)
        for process in running:
            _kill_group(process)


def _protocol_options(protocols: Sequence[str]) -> list[str]:
    options = ["-c", "protocol.allow=never"]
    for name in protocols:
        options += ["-c", f"protocol.{name}.allow=always"]
    return options


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


@dataclass(frozen=True, slots=True)
class GitCredentials:
    """The daemon's credentials for its remotes (``--token-file``, ``--ssh-key-file``) and the
    hosts they may go to (``--repo``'s and each ``--credential-host``): a remote elsewhere, such
    as a ``channelsFrom.git`` only a commit names, is asked without them. Never logged."""

    token: str | None = field(default=None, repr=False)
    ssh_key: Path | None = None
    hosts: tuple[CredentialHost, ...] = ()

    def env(self, url: str) -> dict[str, str]:
        """The environment git needs to reach ``url``: the token as a header bound to that
        https host and port (git's ``http.<url>.extraHeader``), or the key for that ssh host;
        nothing for another host."""
        origin = credential_origin(url)
        if origin is None or not may_get_credentials(url, self.hosts):
            return {}
        scheme, host, port = origin
        if scheme == "https" and self.token is not None:
            where = host if port == 443 else f"{host}:{port}"
            return {
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": f"http.https://{where}/.extraHeader",
                "GIT_CONFIG_VALUE_0": f"Authorization: Bearer {self.token}",
            }
        if scheme == "ssh" and self.ssh_key is not None:
            # git runs this through a shell: the path is one quoted word, whatever it holds
            key = shlex.quote(str(self.ssh_key.absolute()))
            return {"GIT_SSH_COMMAND": f"ssh -i {key} -o IdentitiesOnly=yes"}
        return {}

    def withheld(self, url: str) -> str:
        """Why ``url`` is asked without the credentials the daemon has (``""`` when it is not),
        for the message of a failed call."""
        origin = credential_origin(url)
        given = self.token if origin is not None and origin[0] == "https" else self.ssh_key
        if origin is None or given is None or may_get_credentials(url, self.hosts):
            return ""
        return (
            f" (asked without credentials: {origin[1]}:{origin[2]} is not the host of --repo "
            "nor a --credential-host)"
        )


class RemoteSource:
    """A branch, tag or fixed commit of a repository (a URL or a local path), fetched into a
    bare cache; ``check`` is the cheap "anything new?" question (``git ls-remote``), asked once
    per poll for the whole source. Credentials (:class:`GitCredentials`) go to the remote only
    when its host is one they may go to, and never appear in messages.

    ``local`` is for a remote the user gave on the command line: it may then be a local path
    or ``file://``; a remote named by a commit may not
    (:func:`reconciler.config.remotes.remote_problem`
    refuses it here too, before any git runs). Every git call goes through ``runner`` (its time
    limit and shutdown), the remote always after ``--``.
    """

    def __init__(
        self,
        url: str,
        ref: str,
        path: str,
        cache_dir: Path,
        credentials: GitCredentials | None = None,
        *,
        local: bool = False,
        runner: GitRunner | None = None,
    ) -> None:
        problem = remote_problem(url, local=local)
        if problem is not None:  # the URL itself is not repeated: it may hold a payload
            raise SourceError(f"git remote refused: it {problem}")
        if ref_problem(ref) is not None:
            raise SourceError(f"git ref of {redact(url)} refused: it {ref_problem(ref)}")
        self.url = os.path.abspath(url) if local and is_local(url) else url
        self.ref = ref
        self.path = path.strip("/")
        self.cache_dir = cache_dir
        given = credentials or GitCredentials()
        self.env = given.env(self.url)
        self._withheld = given.withheld(self.url)
        self.protocols = allowed_protocols(local)
        self.runner = runner or GitRunner()
        cache_dir.mkdir(parents=True, exist_ok=True)
        self._repo = git.Repo.init(cache_dir, bare=True)
        self.checks = 0

    @property
    def shown(self) -> str:
        """The URL without credentials, for logs and messages."""
        return redact(self.url)

    def _git(self, *args: str) -> str:
        try:
            return self.runner.run(
                args,
                git_dir=self.cache_dir,
                shown=self.shown,
                protocols=self.protocols,
                env=self.env,
            )
        except TransientError as error:
            if not self._withheld:
                raise
            raise TransientError(f"{error}{self._withheld}", error.retry_after) from None

    def check(self) -> str:
        """The commit the ref points to at the remote now."""
        self.checks += 1
        if _is_commit_id(self.ref):
            return self.ref
        output = self._git(
            "ls-remote",
            "--",
            self.url,
            f"refs/heads/{self.ref}",
            f"refs/tags/{self.ref}",
            f"refs/tags/{self.ref}^{{}}",
        )
        found: dict[str, str] = {}
        for line in output.splitlines():
            sha, _, name = line.partition("\t")
            found[name] = sha
        for name in (
            f"refs/tags/{self.ref}^{{}}",
            f"refs/heads/{self.ref}",
            f"refs/tags/{self.ref}",
        ):
            if name in found:
                return str(found[name])
        raise SourceError(f"{self.shown}: no branch or tag '{self.ref}'")

    def revision(self, commit: str) -> Revision:
        """The config repo at ``commit``, fetched if the cache lacks it; an immutable tree."""
        if not self._has(commit):
            target = self.ref if not _is_commit_id(self.ref) else commit
            self._git("fetch", "--quiet", "--no-tags", "--", self.url, target)
        if not self._has(commit):
            raise SourceError(f"{self.shown}: commit {commit[:12]} not found after fetching")
        tree = self._repo.commit(commit).tree
        return Revision(GitTree(tree, self.path), commit, commit[:12], self.cache_dir)

    def _has(self, commit: str) -> bool:
        try:
            self._repo.commit(commit)
        except (BadName, BadObject, ValueError):
            return False
        return True


def git_reason(errors: bytes) -> str:
    """What git said on standard error, whole, on one line: its ``fatal:`` and ``error:``
    lines when there are any (the advice after them is git's, not ours), else every line.
    Never cut: the last line alone was half a sentence ('and the repository exists.')."""
    lines = [line.strip() for line in errors.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line]
    said = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return "; ".join(said) if said else " ".join(lines)


def redact(text: str) -> str:
    """``https://user:token@host/x`` -> ``https://***@host/x`` wherever it appears."""
    return re.sub(r"(\w+://)[^/@\s]+@", r"\1***@", text)


def _is_commit_id(ref: str) -> bool:
    return re.fullmatch(r"[0-9a-f]{40}", ref) is not None
