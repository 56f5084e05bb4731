"""How the daemon reads a commit from its source: the commit reader the verdict gate judges
through (:class:`reconciler.daemon.commits.CommitReader`).

A new commit is fetched, its signatures checked (:mod:`reconciler.daemon.signing`, handed in as
two callables), its channels taken from their own repository when it names one
(:mod:`reconciler.daemon.channels`), and the whole repo read and validated (C7) with the chart
renderer; what came of it is a :class:`ReadCommit`. A failure that may pass raises a
:class:`~reconciler.errors.TransientError`, one that will not a
:class:`~reconciler.errors.PermanentError`.

Caller: :class:`reconciler.daemon.service.Daemon` (its wiring).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from reconciler.core.diagnostics import Diagnostic
from reconciler.core.head import Head
from reconciler.core.model import ConfigRepo
from reconciler.core.signatures import SignatureVerdict
from reconciler.core.templates import TemplateRenderer
from reconciler.errors import SourceError
from reconciler.operations.model import CommitRecord
from reconciler.source.git import Revision
from reconciler.source.loader import ReadOptions, load_repo


class Source(Protocol):
    """Where commits come from (:class:`reconciler.source.git.RemoteSource`)."""

    path: str

    @property
    def shown(self) -> str:
        """The source's URL without credentials."""

    def check(self) -> str:
        """The commit the followed ref points to now."""

    def revision(self, commit: str) -> Revision:
        """The tree of ``commit``."""


class ChannelsSource(Protocol):
    """The channels of a commit (:class:`reconciler.daemon.channels.Channels`)."""

    def read_options(
        self, revision: Revision, head: Head, *, pinned: bool = False
    ) -> tuple[ReadOptions, Head]:
        """How to read ``revision``, and its head naming the channels commit too."""

    def head(self, config: str) -> Head:
        """The head to be in force, given the config repo's commit ``config``."""


#: The signature verdict on a head read as a revision, given the commit in force (None: it
#: passes; :func:`reconciler.daemon.signing.verify_head`).
VerifyHead = Callable[[Revision, Head, CommitRecord | None], SignatureVerdict | None]
#: The same for the channels repository's commit, with the repository to name
#: (:func:`reconciler.daemon.signing.verify_channels`).
VerifyChannels = Callable[[Head, CommitRecord | None], tuple[SignatureVerdict, str] | None]


@dataclass(frozen=True, slots=True)
class ReadCommit:
    """What reading a commit came to: its head (naming its channels commit once they were
    read), its repo when valid, else what is wrong with it, or the signature verdict it fails
    (``where``: which repository, when not the config repo)."""

    head: Head
    repo: ConfigRepo | None = None
    diagnostics: tuple[Diagnostic, ...] = ()
    unverified: SignatureVerdict | None = None
    where: str = ""


class SourceReader:
    """Reads commits of ``source`` (see the module docstring); its source and renderer may be
    replaced by the daemon's wiring."""

    def __init__(
        self,
        source: Source,
        channels: ChannelsSource,
        renderer: TemplateRenderer,
        verify_head: VerifyHead,
        verify_channels: VerifyChannels,
    ) -> None:
        self.source = source
        self.channels = channels
        self.renderer = renderer
        self._verify_head = verify_head
        self._verify_channels = verify_channels

    def check(self) -> str:
        """The commit the config repo's followed ref points to now (asked first)."""
        return self.source.check()

    def head(self, config: str) -> Head:
        """The head to be in force: ``config``, with the channels repository's commit when
        channels live apart."""
        return self.channels.head(config)

    def read(self, head: Head, in_force: CommitRecord | None) -> ReadCommit:
        """Read and validate ``head``, a new commit (signatures checked since ``in_force``)."""
        revision = self.source.revision(head.config)
        unverified = self._verify_head(revision, head, in_force)
        if unverified is not None:
            return ReadCommit(head, unverified=unverified)
        options, head = self.channels.read_options(revision, head)
        channels_unverified = self._verify_channels(head, in_force)
        if channels_unverified is not None:
            verdict, where = channels_unverified
            return ReadCommit(head, unverified=verdict, where=where)
        validation = load_repo(
            self.source.path or ".", options, tree=revision.tree, renderer=self.renderer
        )
        return ReadCommit(head, validation.repo, tuple(validation.diagnostics))

    def load(self, head: Head) -> ConfigRepo:
        """The repo of ``head``, a commit accepted before (the commit in force, or the one a
        runtime held back by a rollout keeps)."""
        revision = self.source.revision(head.config)
        options, _ = self.channels.read_options(revision, head, pinned=True)
        validation = load_repo(
            self.source.path or ".", options, tree=revision.tree, renderer=self.renderer
        )
        if validation.repo is None:
            raise SourceError(f"commit {head.shown} does not load here")
        return validation.repo
