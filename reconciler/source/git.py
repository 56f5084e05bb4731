"""Git revisions of a config repo, and remotes followed: the git source (the ``git`` command).

:func:`open_revision` finds the git repository that holds a config repo folder and returns a
:class:`~reconciler.source.gittree.GitTree` of that folder at a revision (a branch, tag, commit
or expression such as ``HEAD~1``), so the loader reads a revision exactly as it reads a folder,
without a checkout. A file's content id is its blob id, so a file unchanged between two
revisions is parsed once. git's failures are translated here into
:class:`~reconciler.errors.SourceError`. No Python git library is used: the ``git`` command
reads a revision faster than importing one and walking its tree objects.

:class:`RemoteSource` follows a ref of a remote (the daemon's config repo, a ``channelsFrom.git``
repository); every git call that reaches a remote runs through a :class:`GitRunner`: the remote
after ``--``, only the transports :mod:`reconciler.config.remotes` allows, a time limit, and a
process group that shutdown kills. Callers: ``reconciler diff --base``, the daemon,
``validate``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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
from reconciler.source.gittree import (
    NO_GIT,
    GitTree,
    git_output,
    git_reason,
    run_git,
)


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


def open_revision(folder: Path, revision: str) -> Revision:
    """The config repo at ``folder`` as it is at ``revision`` of the git repository holding it.

    One call to git finds the repository, the folder's place in it and the commit; the listing
    of the commit's folder starts at once, in the background (:meth:`GitTree.list_ahead`), so
    git lists the base while the caller reads the head."""
    verify = ["--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"]
    done = run_git(["-C", str(folder), "rev-parse", *_WHERE, *verify])
    said = done.stdout.decode("utf-8", "surrogateescape").splitlines()
    inside, git_dir, prefix, commit = [*said, "", "", "", ""][:4]
    if inside not in ("true", "false"):
        raise SourceError(f"{folder}: not inside a git repository")
    if inside != "true":
        raise SourceError(f"{folder}: the git repository has no working tree")
    if done.returncode != 0 or not commit:
        top = _rev_parse_in(folder, "--show-toplevel").strip()
        raise SourceError(f"unknown revision '{revision}' in {top}")
    tree = GitTree(git_dir, commit, prefix.rstrip("/"))
    tree.list_ahead()
    return Revision(tree, commit, revision, Path(git_dir))


#: What ``rev-parse`` says of where a folder is: in a working tree, the repository, the prefix.
_WHERE = ("--is-inside-work-tree", "--absolute-git-dir", "--show-prefix")


def _rev_parse_in(folder: Path, *args: str) -> str:
    """``git rev-parse ARGS`` in ``folder``: the repository holding it, as git finds it."""
    done = run_git(["-C", str(folder), "rev-parse", *args])
    if done.returncode != 0:
        raise UnreadableError(git_reason(done.stderr))
    return done.stdout.decode("utf-8", "surrogateescape")


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
            try:
                process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=environment,
                    start_new_session=True,  # one process group: killed with its children
                )
            except FileNotFoundError as error:
                raise SourceError(NO_GIT) from error
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
        https host and port (git's ``http.<url>.extraHeader``), with redirects not followed
        (``http.followRedirects=false``: git would send the header on to where a redirect
        points), or the key for that ssh host; nothing for another host."""
        origin = credential_origin(url)
        if origin is None or not may_get_credentials(url, self.hosts):
            return {}
        scheme, host, port = origin
        if scheme == "https" and self.token is not None:
            where = host if port == 443 else f"{host}:{port}"
            return {  # never re-based by a redirect: the header would go along (git's default)
                "GIT_CONFIG_COUNT": "2",
                "GIT_CONFIG_KEY_0": f"http.https://{where}/.extraHeader",
                "GIT_CONFIG_VALUE_0": f"Authorization: Bearer {self.token}",
                "GIT_CONFIG_KEY_1": "http.followRedirects",
                "GIT_CONFIG_VALUE_1": "false",
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
        _init_bare(cache_dir)
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
            said = f"{error}{self._withheld}"
            if self.env and _REDIRECTED.search(said):
                said += (
                    "; the remote redirects elsewhere, and a remote given credentials is not "
                    "followed there (they would go along): name the URL it redirects to"
                )
            if said == str(error):
                raise
            raise TransientError(said, error.retry_after) from None

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
        tree = GitTree(str(self.cache_dir), commit, self.path)
        return Revision(tree, commit, commit[:12], self.cache_dir)

    def _has(self, commit: str) -> bool:
        if not _is_commit_id(commit):
            return False
        try:
            git_output(str(self.cache_dir), ["cat-file", "-e", f"{commit}^{{commit}}"])
        except UnreadableError:
            return False
        return True


#: git's words for an HTTP redirect it was told not to follow.
_REDIRECTED = re.compile(r"returned error: 30[1278]\b")


def _init_bare(cache_dir: Path) -> None:
    """A bare repository at ``cache_dir`` (``git init`` keeps one that is there)."""
    done = run_git(["init", "--quiet", "--bare", str(cache_dir)])
    if done.returncode != 0:
        raise SourceError(f"{cache_dir}: cannot create the git cache: {git_reason(done.stderr)}")


def redact(text: str) -> str:
    """``https://user:token@host/x`` -> ``https://***@host/x`` wherever it appears."""
    return re.sub(r"(\w+://)[^/@\s]+@", r"\1***@", text)


def _is_commit_id(ref: str) -> bool:
    return re.fullmatch(r"[0-9a-f]{40}", ref) is not None
