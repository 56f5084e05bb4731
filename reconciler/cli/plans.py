"""Plans against clusters, changing nothing: what ``diff`` (without ``--base``) and
``sync --dry-run`` show, through one loop; and the scope of a run (which runtimes, which left
git, the deletion brake's verdict) that ``sync`` shares.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import click

from reconciler.cli import exits
from reconciler.cli.clusters import Access, is_folder
from reconciler.cli.loading import load_valid_repo
from reconciler.cli.options import RunRequest
from reconciler.cli.output import echo_document, is_document
from reconciler.cli.report import plan_text
from reconciler.core.brake import Allowance, Verdict, count_deletions, judge
from reconciler.core.diagnostics import did_you_mean
from reconciler.core.model import ConfigRepo
from reconciler.core.plan import Context
from reconciler.errors import NotFoundError, ReconcilerError
from reconciler.lifecycle.executor import Lifecycle, SyncResult, sync_runtime
from reconciler.operations.runner import deployed, recorded_access
from reconciler.operations.store import StateStore, open_store


@dataclass(frozen=True, slots=True)
class Scope:
    """What one run covers: runtimes in git, runtimes that left it, the brake's verdict."""

    config: ConfigRepo
    store: StateStore
    targets: list[str]
    removed: list[str]
    verdict: Verdict

    @property
    def runtimes(self) -> list[str]:
        """Every runtime of the run: those in git, then those that left it."""
        return self.targets + self.removed


def scope_of(
    config: ConfigRepo,
    names: Sequence[str],
    snapshot: str | None,
    store: StateStore,
    allow: Sequence[str],
) -> Scope:
    """The runtimes to plan or sync and what deleting them means for the brake (S5): runtimes
    the store knows and git dropped are deprovisioned (all of them, or those named)."""
    known = deployed(store)
    chosen = targets(config, names, snapshot, known)
    in_git = [n for n in chosen if n in config.runtimes]
    removed = [n for n in chosen if n not in config.runtimes]
    if not names:
        removed = sorted(set(known) - set(config.runtimes))
    deletions = count_deletions(known, config, only=chosen if names else None)
    verdict = judge(deletions, config.settings, Allowance.parse(allow))
    return Scope(config, store, in_git, removed, verdict)


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


def show_plans(scope: Scope, access: Access, now: datetime, view: PlanView) -> Planned:
    """Plan every runtime of ``scope`` against its cluster (changing nothing) and print the
    plans, the brake's verdict and the runtimes that could not be planned."""
    results, errors = plan_all(scope, access, now)
    if is_document(view.output_format):
        document = view.document(results, errors) | {"deletionBrake": scope.verdict.to_json()}
        echo_document(view.kind, document, view.output_format)
    else:
        for result in results:
            click.echo(plan_text(result.plan, details=view.details), nl=False)
        report_brake(scope.verdict)
        for name, message in sorted(errors.items()):
            click.echo(f"runtime {name}: error: {message}", err=True)
    return Planned(results, errors, scope.verdict.held)


def plan_all(
    scope: Scope, access: Access, now: datetime
) -> tuple[list[SyncResult], dict[str, str]]:
    """Every runtime's plan against its cluster (changing nothing), deprovisions included."""
    results, errors = [], {}
    for name in scope.runtimes:
        try:
            results.append(_plan_one(scope, access, name, now))
        except ReconcilerError as error:
            errors[name] = str(error)
    return results, errors


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


def open_scope(request: RunRequest) -> Scope:
    """Load the valid repo and the state store a run names, and decide its scope."""
    config = load_valid_repo(request.source)
    store = open_store(request.state_url)
    snapshot = request.clusters.snapshot
    return scope_of(config, request.runtime_names, snapshot, store, request.allow_deletions)
