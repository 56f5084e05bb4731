"""Pull-request review: load the config repo at two revisions and diff the fleet.

Reads the base (a git revision, or another folder with ``base_path``) and the head (a git
revision, or the working tree), sharing one parse cache so a file whose blob is the same at both
revisions is parsed once; validates both (checking such a file's documents once); optionally
observes live clusters; and hands both to the pure
:class:`reconciler.core.fleetdiff.FleetDiffer`. Times each phase (git, parse, validate, live,
plan) for ``--timings`` and the benchmark. Callers: ``reconciler diff --base``, bench.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.config.memo import CheckMemo
from reconciler.config.raw import RawRepo
from reconciler.config.schema import SchemaChecker
from reconciler.config.validate import validate_repo
from reconciler.core.fleetdiff import FleetDiff, FleetDiffer
from reconciler.core.model import ConfigRepo
from reconciler.core.plan_values import LiveModule, desired_modules
from reconciler.core.render import Renderer
from reconciler.core.resolve import resolve_runtime
from reconciler.core.templates import Capabilities, RenderCache, TemplateRenderer
from reconciler.errors import ConfigError
from reconciler.render import default_renderer
from reconciler.source.git import open_revision
from reconciler.source.gittree import GitTree
from reconciler.source.loader import ParseCache, ReadOptions, read_repo
from reconciler.source.schemas import load_schemas

if TYPE_CHECKING:
    from reconciler.lifecycle.executor import Lifecycle


@dataclass(slots=True)
class Timings:
    """Seconds spent per phase."""

    phases: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the time spent in the ``with`` block to ``name``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - started

    def move(self, source: str, target: str, seconds: float) -> None:
        """Count ``seconds`` of ``source`` under ``target`` instead."""
        self.phases[source] = self.phases.get(source, 0.0) - seconds
        self.phases[target] = self.phases.get(target, 0.0) + seconds

    def format(self) -> str:
        """``git 0.12s, parse 0.40s, ...``."""
        return ", ".join(f"{name} {seconds:.2f}s" for name, seconds in self.phases.items())


@dataclass(frozen=True, slots=True)
class Side:
    """Where one side of the comparison comes from: a git revision of ``repo`` or a folder."""

    repo: Path
    revision: str | None = None
    folder: Path | None = None


@dataclass(frozen=True, slots=True)
class _Opened:
    """A side about to be read: its git tree (``None``: a folder) and how to name it."""

    side: Side
    tree: GitTree | None
    label: str


@dataclass(slots=True)
class Review:
    """One review: both sides read, validated and compared."""

    options: ReadOptions
    timings: Timings = field(default_factory=Timings)
    cache: ParseCache = field(default_factory=dict)
    memo: CheckMemo = field(default_factory=CheckMemo)
    #: Renders the chart modules of both sides; one cache, so a chart unchanged between them
    #: renders once per distinct values (core.templates).
    renderer: TemplateRenderer = field(default_factory=default_renderer)
    renders: RenderCache = field(default_factory=RenderCache)
    #: What the last syncs recorded of each runtime's cluster: both sides' charts render for it.
    capabilities: Mapping[str, Capabilities] = field(default_factory=dict)
    checker: SchemaChecker = field(default_factory=lambda: SchemaChecker(load_schemas()))

    def load(self, side: Side, what: str) -> tuple[ConfigRepo, str]:
        """The valid repo of ``side`` and its label; :class:`ConfigError` names the side."""
        opened = self.open(side)
        return self.check(self.read(opened), opened, what)

    def load_both(
        self, base: Side, head: Side
    ) -> tuple[tuple[ConfigRepo, str], tuple[ConfigRepo, str]]:
        """Both sides, valid (the base's errors are reported first). The head is read first: a
        pull request's head is usually the working tree, read from disk anyway, so the base then
        reads from git only the blobs the head does not share (a channel bump: one)."""
        base_side, head_side = self.open(base), self.open(head)  # an unknown revision: at once
        head_raw = self.read(head_side)
        base_raw = self.read(base_side)
        return self.check(base_raw, base_side, "base"), self.check(head_raw, head_side, "head")

    def open(self, side: Side) -> _Opened:
        """Where ``side``'s files come from (a revision is resolved, nothing read yet)."""
        if side.revision is None:
            label = str(side.folder) if side.folder is not None else "working tree"
            return _Opened(side, None, label)
        with self.timings.phase("git"):
            revision = open_revision(side.repo, side.revision)
        return _Opened(side, revision.tree, f"{side.revision} ({revision.short})")

    def read(self, opened: _Opened) -> RawRepo:
        """Every file of one side, parsed through the shared cache: a blob parsed already (the
        other side's) is neither read from git nor parsed again."""
        tree, display = opened.tree, str(opened.side.folder or opened.side.repo)
        if tree is not None:
            tree.read_ahead_except({identity for identity, _ in self.cache})
        with self.timings.phase("parse"):
            raw = read_repo(display, self.options, tree=tree, cache=self.cache)
        if tree is not None:  # reading git objects counts as git, not parsing
            self.timings.move("parse", "git", tree.io_seconds)
        return raw

    def check(self, raw: RawRepo, opened: _Opened, what: str) -> tuple[ConfigRepo, str]:
        """The valid repo of a side read, and its label; :class:`ConfigError` names the side."""
        with self.timings.phase("validate"):
            validation = validate_repo(
                raw,
                self.checker,
                memo=self.memo,
                renderer=self.renderer,
                render_cache=self.renders,
                capabilities=self.capabilities,
            )
        if validation.repo is None:
            raise ConfigError(validation.diagnostics, side=f"{what} ({opened.label})")
        return validation.repo, opened.label

    def observe(
        self, head: ConfigRepo, connect: Callable[[ConfigRepo, str], Lifecycle]
    ) -> dict[str, dict[str, LiveModule]]:
        """What each runtime's cluster shows for the head's modules (``--live``/``--snapshot``)."""
        live: dict[str, dict[str, LiveModule]] = {}
        renderer = Renderer(head)
        with self.timings.phase("live"):
            for name, runtime in sorted(head.runtimes.items()):
                desired = desired_modules(head, resolve_runtime(head, runtime), renderer)
                live[name] = connect(head, name).observe(name, desired)
        return live

    def compare(
        self,
        base: tuple[ConfigRepo, str],
        head: tuple[ConfigRepo, str],
        now: datetime,
        live: dict[str, dict[str, LiveModule]] | None = None,
    ) -> FleetDiff:
        """The fleet diff of the two loaded sides."""
        with self.timings.phase("plan"):
            differ = FleetDiffer(base[0], head[0], now, base[1], head[1], live)
            return differ.diff()
