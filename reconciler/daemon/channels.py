"""The daemon's channels source (``channelsFrom.git``): the second repository a commit may take
its release channels from, asked after the config repo, each failure reported on its own.

An unreachable channels source keeps its last seen commit in force, so the config repo's own
commits still apply; a commit whose channels were never seen waits (PENDING, a
:class:`~reconciler.errors.TransientError`), never refused for it. A commit another replica
accepted names its channels commit (the head is pinned): it is read as is, never asked anew.

:class:`Channels` takes the config source's path, how commits are read, how a second source is
made (:data:`MakeSource`), and a clock.

Caller: :class:`reconciler.daemon.service.Daemon` (its poll, and the commit gate reading a
commit through it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from reconciler.core.head import Head
from reconciler.daemon.logs import failure_level, source_failure
from reconciler.daemon.reading import Source
from reconciler.errors import ReconcilerError, TransientError
from reconciler.source.git import Revision, redact
from reconciler.source.loader import ChannelsRepository, ReadOptions, channels_repository

log = logging.getLogger("reconciler.daemon")

#: A channels source: its url, ref and path in that repository.
ChannelsKey = tuple[str, str, str]


#: Makes the source of a channels repository from its url, ref and path.
MakeSource = Callable[[str, str, str], Source]


@dataclass(slots=True)
class ChannelsState:
    """What the daemon knows of its channels source: its last error, its last successful
    check, and the commit each channels source was last seen at (kept in force while it cannot
    be reached)."""

    error: str = ""
    last_success: datetime | None = None
    seen: dict[ChannelsKey, str] = field(default_factory=dict)


class Channels:
    """The channels source of the commit in force, made by ``make_source``."""

    def __init__(
        self,
        path: str,
        read: ReadOptions,
        make_source: MakeSource,
        clock: Callable[[], datetime],
    ) -> None:
        #: The config source's path in its repository (where ``channelsFrom`` is read).
        self.path = path
        #: How a commit is read, before its channels are added.
        self.read = read
        self.make_source = make_source
        self.clock = clock
        self.source: Source | None = None
        self.key: ChannelsKey | None = None
        self.state = ChannelsState()

    def read_options(
        self, revision: Revision, head: Head, *, pinned: bool = False
    ) -> tuple[ReadOptions, Head]:
        """How to read ``revision``: with ``channelsFrom.git``, the channels come from that
        repository's commit, and the head then names both commits. A remote git may not fetch
        is never asked (validation refuses the commit with its place). ``pinned``: the head's
        channels commit is the one (a commit another replica accepted), never asked anew."""
        config, seen = head.config, head.channels
        wanted = channels_repository(self.path or ".", revision.tree)
        if wanted is None:
            self.source = None
            self.state.error = ""
            return self.read, Head(config)
        same = self.source is not None and self.key == _key(wanted)
        channels = self._source_for(wanted)
        commit = seen if (same or pinned) and seen else self.commit_now(channels)
        if not commit:
            raise TransientError(
                f"commit {config[:12]} waits for its channels source {channels.shown}: "
                f"{self.state.error}"
            )
        try:
            tree = channels.revision(commit).tree
        except ReconcilerError as error:
            self.state.error = str(error)
            raise
        label = f"{channels.shown}@{commit[:12]}"
        options = replace(self.read, channels_tree=tree, channels_label=label)
        return options, Head(config, commit)

    def _source_for(self, wanted: ChannelsRepository) -> Source:
        key = _key(wanted)
        if self.source is None or self.key != key:
            try:
                self.source = self.make_source(wanted.url, wanted.ref, wanted.sub_path)
            except ReconcilerError as error:
                self.state.error = str(error)
                raise
            self.key = key
        return self.source

    def commit_now(self, channels: Source) -> str:
        """The channels source's commit now, or the last one seen when it cannot be asked
        (its error then in ``/status``); ``""`` when never seen."""
        key = self.key or ("", "", "")
        try:
            commit = channels.check()
        except ReconcilerError as error:
            self.state.error = str(error)
            known = self.state.seen.get(key, "")
            kept = known[:12] or "none"
            log.log(
                failure_level(error),
                "channels source %s, keeping %s: %s",
                source_failure(error),
                kept,
                error,
            )
            return known
        self.state.error = ""
        self.state.last_success = self.clock()
        self.state.seen[key] = commit
        return commit

    def head(self, config: str) -> Head:
        """The commit to be in force: the config repo's (asked first, by the caller), and the
        channels repository's when channels live apart (one remote check per source)."""
        if self.source is None:
            return Head(config)
        return Head(config, self.commit_now(self.source) or None)

    def status(self, in_force: Head | None) -> dict[str, Any] | None:
        """``/status`` of the channels source, reported apart (None: the commit has none)."""
        if self.source is None and not self.state.error:
            return None
        url, ref, path = self.key or ("", "", "")
        last = self.state.last_success
        return {
            "url": self.source.shown if self.source is not None else redact(url),
            "ref": ref,
            "path": path,
            "commit": (in_force.channels if in_force else None) or "",
            "lastSuccessfulCheck": last.isoformat() if last else None,
            "error": self.state.error,
        }


def _key(wanted: ChannelsRepository) -> ChannelsKey:
    return (wanted.url, wanted.ref, wanted.sub_path)
