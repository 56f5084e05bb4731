"""What validating a config repo once leaves for validating another revision of it (pure).

A review validates two revisions whose files are mostly the same blobs, parsed once and shared
as the same :class:`~reconciler.config.yamlsafe.Document` objects. What depends on nothing but
such a document is kept here by document and found again for the other revision: the findings of
the single-document checks (schema, inline credentials, a manifest object's structure) and the
typed runtime built from a Runtime document. Callers: the validator (``config.validate``), the
review (``review.fleet``), which shares one memo between the revisions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from reconciler.config.builders import runtime_from
from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic
from reconciler.core.model import ConfigRepo, Runtime
from reconciler.core.resolve import RESOLUTIONS


@dataclass(slots=True)
class CheckMemo:
    """What the checks of single documents found (schema and inline credentials; a manifest
    object's structure), kept by document: a document that two reads share (the two revisions
    of a review, parsed once per blob) is checked once. These checks look at nothing but the
    document, so their findings are the same in both reads."""

    _found: dict[tuple[str, int], tuple[Document, tuple[Diagnostic, ...]]] = field(
        default_factory=dict
    )
    #: How many checks ran (the others were answered from memory).
    checked: int = 0
    #: How many typed runtimes were built (the others were found again).
    built: int = 0
    _runtimes: dict[int, tuple[Document, str, Runtime]] = field(default_factory=dict)
    #: How many resolutions were taken from the previous validation (not resolved again).
    carried: int = 0
    #: The modules and channels the last validation resolved against, and the channels whose
    #: served versions the current one shares with it.
    _previous: ConfigRepo | None = None
    _current: ConfigRepo | None = None
    _alike: frozenset[str] = frozenset()

    def known(self, what: str, document: Document) -> tuple[Diagnostic, ...] | None:
        """What a check of ``document`` as ``what`` found, if it ran already."""
        known = self._found.get((what, id(document)))
        return known[1] if known is not None and known[0] is document else None

    def found(
        self, what: str, document: Document, check: Callable[[], list[Diagnostic]]
    ) -> tuple[Diagnostic, ...]:
        """What ``check()`` finds in ``document`` (checked as ``what``), from memory if known."""
        key = (what, id(document))
        known = self._found.get(key)
        if known is not None and known[0] is document:
            return known[1]
        found = tuple(check())
        self.checked += 1
        self._found[key] = (document, found)  # the document kept: its id stays its own
        return found

    def runtime(self, document: Document, source: str) -> Runtime:
        """The typed runtime of the valid Runtime ``document`` read from ``source``: one object
        for a document two reads share (it is built from nothing else)."""
        known = self._runtimes.get(id(document))
        if known is not None and known[0] is document and known[1] == source:
            return known[2]
        runtime = runtime_from(document.data, source)
        self.built += 1
        self._runtimes[id(document)] = (document, source, runtime)
        return runtime

    def start(self, repo: ConfigRepo) -> None:
        """A validation resolves against ``repo`` (its modules and channels) now; compare it
        with the previous validation's."""
        self._previous, self._current = self._current, repo
        self._alike = alike_channels(self._previous, repo) if self._previous else frozenset()

    def carry(self, repo: ConfigRepo, runtime: Runtime) -> None:
        """Let ``repo`` know the previous validation's resolution of ``runtime`` (the same
        object) when resolving it reads nothing that differs: the modules' names, versions,
        ``mandatory`` and ``dependsOn``, the channel names, and what the channels it names
        serve (see ``core.resolve``)."""
        if repo is not self._current or self._previous is None:
            return
        known = RESOLUTIONS.known(self._previous, runtime)
        if known is None or RESOLUTIONS.known(repo, runtime) is not None:
            return
        channels = {runtime.channel, *(ref.channel for ref in runtime.modules if ref.channel)}
        if channels <= self._alike:
            RESOLUTIONS.remember(repo, known)
            self.carried += 1


def alike_channels(before: ConfigRepo, after: ConfigRepo) -> frozenset[str]:
    """The channels of ``after`` through which a runtime resolves as in ``before``: none when
    a module's name, versions, ``mandatory`` or ``dependsOn`` differ, or the channel names do;
    else those serving the same versions."""
    if before.channels.keys() != after.channels.keys() or _shape(before) != _shape(after):
        return frozenset()
    was = before.channels
    return frozenset(
        name
        for name, channel in after.channels.items()
        if (channel.name, channel.modules) == (was[name].name, was[name].modules)
    )


def _shape(repo: ConfigRepo) -> dict[str, tuple[object, ...]]:
    """What of each module resolution reads."""
    return {
        name: (m.name, tuple(m.versions), m.mandatory, m.depends_on)
        for name, m in repo.modules.items()
    }
