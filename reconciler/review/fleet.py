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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.config.schema import SchemaChecker
from reconciler.config.validate import CheckMemo, validate_repo
from reconciler.core.fleetdiff import FleetDiff, FleetDiffer
from reconciler.core.model import ConfigRepo
from reconciler.core.plan_values import LiveModule
from reconciler.core.render import Renderer
from reconciler.core.resolve import resolve_runtime
from reconciler.core.templates import RenderCache, TemplateRenderer
from reconciler.errors import ConfigError
from reconciler.render import default_renderer
from reconciler.source.git import GitTree, open_revision
from reconciler.source.loader import ParseCache, ReadOptions, read_repo
from reconciler.source.schemas import load_schemas
from reconciler.source.tree import SourceTree

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
    checker: SchemaChecker = field(default_factory=lambda: SchemaChecker(load_schemas()))

    def load(self, side: Side, what: str) -> tuple[ConfigRepo, str]:
        """The valid repo of ``side`` and its label; :class:`ConfigError` names the side."""
        tree: SourceTree | None = None
        label = str(side.folder) if side.folder is not None else "working tree"
        display = str(side.folder or side.repo)
        if side.revision is not None:
            with self.timings.phase("git"):
                revision = open_revision(side.repo, side.revision)
            tree, label = revision.tree, f"{side.revision} ({revision.short})"
        with self.timings.phase("parse"):
            raw = read_repo(display, self.options, tree=tree, cache=self.cache)
        if isinstance(tree, GitTree):  # reading git objects counts as git, not parsing
            self.timings.move("parse", "git", tree.io_seconds)
        with self.timings.phase("validate"):
            validation = validate_repo(
                raw, self.checker, memo=self.memo, renderer=self.renderer, render_cache=self.renders
            )
        if validation.repo is None:
            raise ConfigError(validation.diagnostics, side=f"{what} ({label})")
        return validation.repo, label

    def observe(
        self, head: ConfigRepo, connect: Callable[[ConfigRepo, str], Lifecycle]
    ) -> dict[str, dict[str, LiveModule]]:
        """What each runtime's cluster shows for the head's modules (``--live``/``--snapshot``)."""
        from reconciler.lifecycle.executor import desired_modules  # only when clusters are asked

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
