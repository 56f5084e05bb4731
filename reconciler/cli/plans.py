"""Plans against clusters, changing nothing: what ``diff`` (without ``--base``) and
``sync --dry-run`` show, through one loop; and the scope of a run (which runtimes, which left
git, the deletion brake's verdict) that ``sync`` shares.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import click

from reconciler.cli import exits
from reconciler.cli.clusters import Access, is_folder
from reconciler.cli.loading import load_valid_repo
from reconciler.cli.options import RunRequest
from reconciler.cli.output import echo_document, is_document
from reconciler.cli.progress import ANNOUNCED_FROM, Progress
from reconciler.cli.report import plan_text
from reconciler.cli.workers import RampUp, fleet_width
from reconciler.core.brake import Allowance, Limits, Verdict
from reconciler.core.diagnostics import did_you_mean
from reconciler.core.model import ConfigRepo
from reconciler.core.plan_values import Context
from reconciler.errors import NotFoundError, ReconcilerError
from reconciler.lifecycle.executor import Lifecycle, SyncResult, sync_runtime
from reconciler.operations.capabilities import ChartRendering
from reconciler.operations.runner import recorded_access
from reconciler.operations.running import Judged, fetch_verdict
from reconciler.operations.store import StateStore, open_store, open_store_to_read


@dataclass(frozen=True, slots=True)
class Scope:
    """What one run covers: runtimes in git, runtimes that left it, the brake's verdict."""

    config: ConfigRepo
    store: StateStore
    targets: list[str]
    removed: list[str]
    verdict: Verdict
    #: How the run reaches the runtimes' clusters.
    access: Access
    #: How a sync renders a runtime's charts again for what its cluster serves (none: offline).
    charts: ChartRendering | None = None

    @property
    def runtimes(self) -> list[str]:
        """Every runtime of the run: those in git, then those that left it."""
        return self.targets + self.removed


def scope_of(
    config: ConfigRepo,
    names: Sequence[str],
    access: Access,
    store: StateStore,
    allow: Sequence[str],
    parallel: int = 1,
) -> Scope:
    """The runtimes to plan or sync and what deleting them means for the brake (S5): runtimes
    the store knows and git dropped are deprovisioned (all of them, or those named). The brake
    counts what the clusters' inventories hold (and the store knows), at the stricter of the
    repo's limits and those recorded by the last sync of the whole fleet (the defaults before
    one: :func:`reconciler.core.brake.limits_for`)."""
    snapshot = access.options.snapshot
    known = store.deployed()
    chosen = targets(config, names, snapshot, known)
    in_git = [n for n in chosen if n in config.runtimes]
    removed = [n for n in chosen if n not in config.runtimes]
    if not names:
        removed = sorted(set(known) - set(config.runtimes))
    only = chosen if names else None  # what a run of some runtimes can delete is theirs alone
    judged = Judged(config, Allowance.parse(allow), store.limits_in_force(), only=only)
    verdict, _ = fetch_verdict(
        store,
        access.connect,
        judged,
        workers=fleet_width(parallel, snapshot),
        release=access.release,
        reading=announce_reading,
    )
    return Scope(config, store, in_git, removed, verdict, access)


def announce_reading(count: int) -> None:
    """One line on standard error before the brake reads ``count`` clusters, when they are
    many: the first line of a large run comes at once, not after the read."""
    if count >= ANNOUNCED_FROM:
        click.echo(f"deletion brake: reading the inventories of {count} runtimes", err=True)


def targets(
    config: ConfigRepo,
    names: Sequence[str],
    snapshot: str | None,
    known: Mapping[str, object] | None = None,
) -> list[str]:
    """The runtimes named (in git, or known to the state store: a removed one), else all in git."""
    for name in names:
        if name not in config.runtimes and name not in (known or {}):
            raise NotFoundError(
                f"runtime '{name}' does not exist" + did_you_mean(name, config.runtimes)
            )
    chosen = list(dict.fromkeys(names)) or sorted(config.runtimes)
    if snapshot is not None and not is_folder(snapshot) and len(chosen) > 1:
        raise click.UsageError(
            "--snapshot FILE holds one cluster: name one --runtime, or give a folder of "
            "<runtime>.yaml files"
        )
    return chosen


def report_brake(verdict: Verdict) -> None:
    """The brake's verdict on its own line when anything is deleted (stderr when it holds)."""
    if verdict.deletions.count:
        click.echo(verdict.message, err=verdict.held)


def record_limits(scope: Scope) -> None:
    """Keep the repo's brake limits in the store as those in force: a sync of the whole fleet
    went ahead under them (a sync of some runtimes only never raises them)."""
    from reconciler.cli.clusters import now

    scope.store.record_limits(Limits.of(scope.config.settings), now())


#: The JSON document of a run's results and the runtimes that could not be planned.
Document = Callable[[Sequence[SyncResult], dict[str, str]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class PlanView:
    """How planned runtimes are printed; ``diff`` and ``sync --dry-run`` differ only here."""

    output_format: str
    details: bool
    document: Document
    #: The ``kind`` of the JSON/YAML document (docs/json-output.md).
    kind: str


@dataclass(frozen=True, slots=True)
class Planned:
    """The outcome of planning a run's runtimes."""

    results: list[SyncResult]
    errors: dict[str, str]
    held: bool

    def exit_status(self, changes: int) -> int:
        """USAGE when a runtime could not be planned, HELD when the brake holds, ``changes``
        when a plan changes anything, else OK."""
        if self.errors:
            return exits.USAGE
        if self.held:
            return exits.HELD
        return changes if any(r.plan.has_changes for r in self.results) else exits.OK


def show_plans(
    scope: Scope, access: Access, now: datetime, view: PlanView, parallel: int = 1
) -> Planned:
    """Plan every runtime of ``scope`` against its cluster (changing nothing), ``parallel`` at
    a time, and print the plans in the order of the runtimes as soon as each is known (text:
    streamed, with progress on standard error; json/yaml: one document at the end), then the
    brake's verdict and the runtimes that could not be planned."""
    names = scope.runtimes
    document = is_document(view.output_format)
    stream = _OrderedOutput(names, None if document else view.details)
    progress = Progress(
        len(names), sys.stderr, time.monotonic, terminal=sys.stderr.isatty(), verb="planned"
    )

    ramp = RampUp(fleet_width(parallel, access.options.snapshot), time.monotonic)

    def plan(name: str) -> None:
        with ramp.slot():
            try:
                stream.add(name, _plan_one(scope, access, name, now), None, progress)
            except ReconcilerError as error:
                stream.add(name, None, str(error), progress)
            finally:
                access.release(name)

    with ThreadPoolExecutor(max_workers=ramp.limit) as pool:
        try:
            list(pool.map(plan, names))
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)
            progress.close("stopped by Ctrl-C; nothing was changed")
            raise click.exceptions.Exit(exits.INTERRUPTED) from None
    progress.close(summary=len(names) > 1 and not document)
    results, errors = stream.results(), stream.errors
    if document:
        body = view.document(results, errors) | {"deletionBrake": scope.verdict.to_json()}
        echo_document(view.kind, body, view.output_format)
    else:
        report_brake(scope.verdict)
    return Planned(results, errors, scope.verdict.held)


class _OrderedOutput:
    """Plans printed in the order of the runtimes, each as soon as those before it are known
    (the output is the same whatever finishes first); ``details`` None prints nothing."""

    def __init__(self, names: Sequence[str], details: bool | None) -> None:
        self._names = list(names)
        self._details = details
        self._known: dict[str, SyncResult | None] = {}
        self._next = 0
        self._lock = threading.Lock()
        self.errors: dict[str, str] = {}

    def add(
        self, name: str, result: SyncResult | None, error: str | None, progress: Progress
    ) -> None:
        """``name``'s plan (or ``error``); prints what is now next in order."""
        with self._lock:
            self._known[name] = result
            if error is None:
                progress.finished("done")
            else:  # at once, on standard error
                self.errors[name] = error
                progress.finished("failed", f"runtime {name}: error: {error}\n", sys.stderr)
            progress.write(self._ready_text(), sys.stdout)

    def _ready_text(self) -> str:
        parts = []
        while self._next < len(self._names) and self._names[self._next] in self._known:
            name = self._names[self._next]
            self._next += 1
            result = self._known[name]
            if self._details is not None and result is not None:
                parts.append(plan_text(result.plan, details=self._details))
        return "".join(parts)

    def results(self) -> list[SyncResult]:
        """The plans, in the order of the runtimes."""
        found = (self._known.get(name) for name in self._names)
        return [result for result in found if result is not None]


def _plan_one(scope: Scope, access: Access, name: str, now: datetime) -> SyncResult:
    config = scope.config
    if name in config.runtimes:
        cluster = access.connect(config.runtimes[name].cluster, name)
        return sync_runtime(cluster, config, name, now=now, dry_run=True)
    recorded = recorded_access(scope.store, name)
    lifecycle = Lifecycle(
        access.connect(recorded, name), system_namespace=config.settings.system_namespace
    )
    result = lifecycle.sync(Context.of(config, name, now), [], dry_run=True)
    return replace(result, plan=replace(result.plan, deprovision=True))


def open_scope(
    request: RunRequest, parallel: int = 1, *, to_change: bool = True, document: bool = False
) -> Scope:
    """Load the valid repo and the state store a run names, and decide its scope. A run that
    changes nothing (``to_change`` False: ``diff``, ``sync --dry-run``) creates no store: where
    none exists it plans with an empty one in memory. The charts render with the capabilities
    the store recorded, said on stderr unless the output is a ``document`` (JSON, YAML) or a
    sync on clusters renders for what each one serves."""
    from reconciler.cli.capabilities import RecordedCapabilities, say_capabilities
    from reconciler.core.templates import RenderCache
    from reconciler.render import default_renderer

    recorded = RecordedCapabilities(request.state_url)
    cache = RenderCache()
    config = load_valid_repo(request.source, recorded, cache)
    access = Access(request.clusters, config.settings)  # a mistyped --snapshot stops here
    store = open_store(request.state_url) if to_change else open_store_to_read(request.state_url)
    scope = scope_of(
        config, request.runtime_names, access, store, request.allow_deletions, parallel
    )
    offline = request.clusters.snapshot is not None
    if (offline or not to_change) and not document:
        say_capabilities(config, recorded, scope.targets)
    if offline:
        return scope
    return replace(scope, charts=ChartRendering(default_renderer(), cache, recorded))
