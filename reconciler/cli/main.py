"""The ``reconciler`` command line (click): the composition root of the program.

Parses arguments, builds the loader's options and hands them down; nothing deeper reads the
environment or prints. Exit codes are carried by exception types: 0 success, 1 the config repo is
invalid (:class:`~reconciler.errors.ConfigError`), 2 a usage or I/O error (every other
:class:`~reconciler.errors.ReconcilerError`, and click's usage errors). Any other exception is a
bug: one line ``error: internal error: TYPE: message`` and exit 2 (1 would read as "invalid" or
"changes pending" to a script); ``--debug`` or ``RECONCILER_DEBUG=1`` prints its traceback. An
unexpected exception inside a step fails only its operation (see
:mod:`reconciler.operations.crash`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click
import yaml

from reconciler import __version__
from reconciler.cli.report import (
    Style,
    fleet_markdown,
    fleet_text,
    plan_text,
    plans_json,
    results_json,
)
from reconciler.cluster.api import Cluster
from reconciler.cluster.snapshot import SnapshotFileCluster
from reconciler.config.validate import Validation
from reconciler.core.brake import Allowance, Deletions, Verdict, count_deletions, judge
from reconciler.core.diagnostics import did_you_mean
from reconciler.core.durations import parse_duration
from reconciler.core.fleetdiff import FleetDiff
from reconciler.core.model import ClusterAccess, ConfigRepo, Settings
from reconciler.core.plan import Context
from reconciler.core.render import Renderer
from reconciler.core.resolve import Resolution, resolve_runtime
from reconciler.core.versions import sorted_versions
from reconciler.errors import (
    AccessError,
    ConfigError,
    HeldByBrakeError,
    NotFoundError,
    ReconcilerError,
)
from reconciler.lifecycle.executor import Lifecycle, SyncResult, sync_runtime
from reconciler.operations.crash import Crash
from reconciler.operations.engine import Engine
from reconciler.operations.model import (
    Operation,
    OperationState,
    OperationType,
    operation_limits,
)
from reconciler.operations.report import (
    operation_json,
    operation_line,
    operation_text,
    operation_tree,
    status_lines,
)
from reconciler.operations.runner import Runner, deployed, recorded_access
from reconciler.operations.store import StateStore, default_state_url, open_store
from reconciler.source.loader import (
    DEFAULT_MAX_FILE_SIZE,
    ReadOptions,
    channels_repository,
    load_repo,
)

EXIT_OK, EXIT_INVALID, EXIT_ERROR, EXIT_HELD = 0, 1, 2, 3

_Dumper: type[Any] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

repo_argument = click.argument(
    "repo", default=".", type=click.Path(file_okay=False, path_type=Path), metavar="[REPO]"
)
#: The time limit of git calls to a remote (daemon: also ``--git-timeout``).
GIT_TIMEOUT_ENV = "RECONCILER_GIT_TIMEOUT"
#: Show tracebacks of internal errors (also ``--debug``).
DEBUG_ENV = "RECONCILER_DEBUG"

channels_option = click.option(
    "--channels",
    "channels_dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Read channels from this folder instead of the one reconciler.yaml names.",
)
max_size_option = click.option(
    "--max-file-size",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_FILE_SIZE,
    show_default=True,
    help="Refuse YAML files larger than this many bytes.",
)


class Duration(click.ParamType[float, Any]):
    """A duration above zero such as ``45s``, ``10m`` or ``1h30m``, as seconds."""

    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            return value
        try:
            seconds = parse_duration(str(value).strip())
        except ValueError:
            seconds = 0.0
        if seconds <= 0:
            self.fail(f"{str(value)[:40]!r} is not a duration above zero such as 45s, 10m or 1h30m")
        return seconds


def _listen_address(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, int]:
    """``HOST:PORT`` with a port from 0 (any free port) to 65535."""
    host, _, port = value.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise click.BadParameter(f"{value[:60]!r} is not HOST:PORT (a port from 0 to 65535)")
    return host or "0.0.0.0", int(port)  # noqa: S104 (a server; /sync and /hooks/git need the secret)


class _Group(click.Group):
    """Maps our errors to messages and exit codes, for every command, in one place; anything
    else is a bug: one line and exit 2 (the traceback with --debug)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ReconcilerError as error:
            ctx.exit(_report(error))
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as error:  # the crash barrier of every command
            ctx.exit(_report_internal(ctx, error))


@click.group(
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, "--version", prog_name="reconciler")
@click.option(
    "--debug",
    is_flag=True,
    envvar=DEBUG_ENV,
    help=f"Show the traceback of an internal error (a bug), also {DEBUG_ENV}=1.",
)
def cli(debug: bool) -> None:
    """Declarative GitOps for Kubernetes modules across a fleet of clusters.

    A config repo declares runtimes (clusters), modules (one folder per version) and release
    channels. validate checks such a repo, render shows what each runtime should run, diff
    shows what would change in the clusters and sync makes it so.
    """


@cli.command()
@repo_argument
@channels_option
@max_size_option
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: one compiler-style line per error; json: a document for tools.",
)
def validate(repo: Path, channels_dir: Path | None, max_file_size: int, output_format: str) -> None:
    """Check a config repo against every rule and list every error in one pass.

    Each error reads PATH:LINE:COL: RULE MESSAGE (JSON-POINTER). Exit status: 0 valid,
    1 invalid, 2 the repo could not be read or the command line is wrong. REPO defaults to the
    current directory.
    """
    validation = _load(repo, channels_dir, max_file_size)
    if output_format == "json":
        click.echo(json.dumps(_validation_json(repo, validation), indent=2, sort_keys=True))
    else:
        for diagnostic in validation.diagnostics:
            click.echo(diagnostic.format())
        click.echo(_summary(repo, validation), err=not validation.valid)
    sys.exit(EXIT_OK if validation.valid else EXIT_INVALID)


@cli.command()
@repo_argument
@click.option("--runtime", "runtime_name", required=True, help="The runtime to render.")
@click.option(
    "--module",
    "modules",
    multiple=True,
    help="Only this module (repeat for several).",
)
@channels_option
@max_size_option
def render(
    repo: Path,
    runtime_name: str,
    modules: Sequence[str],
    channels_dir: Path | None,
    max_file_size: int,
) -> None:
    """Print the objects a runtime should run, as a YAML stream.

    Modules come in dependency order, each headed by a comment with its version and where the
    version came from; inside a module CRDs and Namespaces come first and the default
    configuration last. Every object carries the reconciler's labels and annotations.
    """
    config = _valid_repo(repo, channels_dir, max_file_size)
    runtime = config.runtimes.get(runtime_name)
    if runtime is None:
        raise NotFoundError(
            f"runtime '{runtime_name}' does not exist" + did_you_mean(runtime_name, config.runtimes)
        )
    resolution = resolve_runtime(config, runtime)
    unknown = [m for m in modules if resolution.module(m) is None]
    if unknown:
        names = [m.name for m in resolution.modules]
        raise NotFoundError(
            f"runtime '{runtime_name}' does not run module '{unknown[0]}'"
            + did_you_mean(unknown[0], names)
            + f" (it runs: {', '.join(names)})"
        )
    click.echo(render_stream(config, resolution, modules), nl=False)


snapshot_option = click.option(
    "--snapshot",
    type=click.Path(),
    help="Use a recorded cluster instead of a live one: a YAML file of objects (one runtime) or "
    "a folder of <runtime>.yaml files (an existing folder, or a path ending in /). sync writes "
    "the result back (not with --dry-run).",
)
kubeconfig_dir_option = click.option(
    "--kubeconfig-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    envvar="RECONCILER_KUBECONFIG_DIR",
    help="Folder of the kubeconfig files that runtimes name in spec.cluster.kubeconfigFile.",
)
secret_namespace_option = click.option(
    "--secret-namespace",
    default="reconciler-system",
    show_default=True,
    help="Namespace of the Secrets that runtimes name in spec.cluster.kubeconfigSecret.",
)
runtimes_option = click.option(
    "--runtime",
    "runtime_names",
    multiple=True,
    help="Only this runtime (repeat for several; default: every runtime).",
)
state_option = click.option(
    "--state",
    "state_url",
    envvar="RECONCILER_STATE",
    default=default_state_url,
    show_default="sqlite:///~/.local/state/reconciler/state.db; with --snapshot, "
    "reconciler-state.db beside the snapshot",
    help="The state store of operations and runtime states (RECONCILER_STATE): sqlite:///PATH "
    "or postgresql://USER@HOST[:PORT]/DATABASE. Rehearsals with --snapshot keep a store of "
    "their own unless this is given.",
)
allow_option = click.option(
    "--allow-deletions",
    "allow_deletions",
    multiple=True,
    metavar="COUNT|RUNTIME",
    help="Let this run delete over the deletion brake: up to COUNT runtimes, modules and CRDs, "
    "or those of the RUNTIMEs named (repeat for several).",
)
format_option = click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
)


@cli.command()
@repo_argument
@runtimes_option
@click.option(
    "--base",
    "base_rev",
    metavar="REV",
    help="Compare the whole fleet with this git revision of the repository holding REPO "
    "(a branch, tag, commit or HEAD~1); no cluster needed.",
)
@click.option(
    "--head",
    "head_rev",
    metavar="REV",
    help="With --base/--base-path: the revision to compare (default: the working tree).",
)
@click.option(
    "--base-path",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Compare with the config repo in this folder (e.g. a separate checkout of the target "
    "branch) instead of a git revision.",
)
@click.option(
    "--live",
    is_flag=True,
    help="With --base/--base-path: plan against each runtime's live cluster instead of "
    "assuming the base revision is what runs (running versions, blocking objects).",
)
@snapshot_option
@kubeconfig_dir_option
@secret_namespace_option
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
    help="markdown (fleet diffs only) fits a pull-request comment.",
)
@click.option(
    "--details/--no-details",
    default=None,
    help="Object changes and field diffs (default: on for live diffs, off for fleet diffs).",
)
@click.option("--color/--no-color", default=None, help="Colour (default: when on a terminal).")
@click.option(
    "--now",
    type=click.DateTime(formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"]),
    help="Judge maintenance windows at this UTC time instead of now (e.g. the planned merge).",
)
@click.option("--timings", is_flag=True, help="Print the time of each phase to stderr.")
@state_option
@allow_option
@channels_option
@max_size_option
@click.pass_context
def diff(
    ctx: click.Context,
    repo: Path,
    runtime_names: Sequence[str],
    base_rev: str | None,
    head_rev: str | None,
    base_path: Path | None,
    live: bool,
    snapshot: str | None,
    kubeconfig_dir: Path | None,
    secret_namespace: str,
    output_format: str,
    details: bool | None,
    color: bool | None,
    now: datetime | None,
    timings: bool,
    state_url: str,
    allow_deletions: Sequence[str],
    channels_dir: Path | None,
    max_file_size: int,
) -> None:
    """Show what would change, changing nothing: in live clusters, or across the whole fleet
    between two revisions.

    Without --base: per runtime, per module (install, upgrade, reconfigure, unchanged, removal,
    blocked or deferred, with a reason), per object (+ create, ~ update with field diffs,
    - delete) against each runtime's cluster; Secret values are masked. Runtimes the state store
    knows that left git are shown as deprovisions, with the deletion brake's verdict. Exit status
    like kubectl diff: 0 no changes, 1 changes, 2 an error, 3 changes the deletion brake holds.

    With --base REV (or --base-path DIR): the fleet-wide plan of a pull request, no cluster
    needed: a summary per module change ("serverless 1.2.0 -> 1.3.0 upgrade on 37 runtimes: 30
    now, 5 in their maintenance window, 2 held: downgrade"), then every runtime's changes, each
    with its cause (the file and field that made it). Exit status: 0 no change, 1 changes,
    2 error (e.g. an invalid head), 3 changes that delete modules or runtimes or are held.
    """
    when = now.replace(tzinfo=UTC) if now else _now()
    if base_rev is not None or base_path is not None:
        options = ReadOptions(max_file_size=max_file_size, channels_dir=channels_dir)
        access = _Access(kubeconfig_dir, secret_namespace, snapshot) if live or snapshot else None
        style = _style(color)
        _fleet_diff(
            _FleetRequest(repo, base_rev, head_rev, base_path, runtime_names, snapshot, when),
            options,
            access,
            output_format,
            bool(details),
            style,
            timings,
        )
    if output_format == "markdown":
        raise click.UsageError("--format markdown needs --base or --base-path")
    config = _valid_repo(repo, channels_dir, max_file_size)
    store = open_store(_state_url(ctx, state_url, snapshot))
    scope = _scope(config, runtime_names, snapshot, store, allow_deletions)
    access = _Access(kubeconfig_dir, secret_namespace, snapshot)
    results, errors = _plan_all(scope, access, when)
    plans = [r.plan for r in results]
    if output_format == "json":
        document = plans_json(plans, errors) | {"deletionBrake": scope.verdict.to_json()}
        click.echo(json.dumps(document, indent=2, sort_keys=True))
    else:
        for the_plan in plans:
            click.echo(plan_text(the_plan, details=details is not False), nl=False)
        _report_brake(scope.verdict)
        for name, message in sorted(errors.items()):
            click.echo(f"runtime {name}: error: {message}", err=True)
    if errors:
        sys.exit(EXIT_ERROR)
    if scope.verdict.held:
        sys.exit(EXIT_HELD)
    sys.exit(EXIT_INVALID if any(p.has_changes for p in plans) else EXIT_OK)


@dataclass(frozen=True, slots=True)
class _Scope:
    """What one run covers: runtimes in git, runtimes that left it, the brake's verdict."""

    config: ConfigRepo
    store: StateStore
    targets: list[str]
    removed: list[str]
    verdict: Verdict


def _scope(
    config: ConfigRepo,
    names: Sequence[str],
    snapshot: str | None,
    store: StateStore,
    allow: Sequence[str],
) -> _Scope:
    """The runtimes to plan or sync and what deleting them means for the brake (S5): runtimes
    the store knows and git dropped are deprovisioned (all of them, or those named)."""
    known = deployed(store)
    chosen = _targets(config, names, snapshot, known)
    targets = [n for n in chosen if n in config.runtimes]
    removed = [n for n in chosen if n not in config.runtimes]
    if not names:
        removed = sorted(set(known) - set(config.runtimes))
    deletions = count_deletions(known, config, only=chosen if names else None)
    verdict = judge(deletions, config.settings, Allowance.parse(allow))
    return _Scope(config, store, targets, removed, verdict)


def _plan_all(
    scope: _Scope, access: _Access, now: datetime
) -> tuple[list[SyncResult], dict[str, str]]:
    """Every runtime's plan against its cluster (changing nothing), deprovisions included."""
    results, errors = [], {}
    for name in scope.targets + scope.removed:
        try:
            results.append(_plan_one(scope, access, name, now))
        except ReconcilerError as error:
            errors[name] = str(error)
    return results, errors


def _plan_one(scope: _Scope, access: _Access, name: str, now: datetime) -> SyncResult:
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


def _report_brake(verdict: Verdict) -> None:
    if verdict.deletions.count:
        click.echo(verdict.message, err=verdict.held)


def _state_url(ctx: click.Context, state_url: str, snapshot: str | None) -> str:
    """Rehearsals never share a store with real runs: with ``--snapshot`` and no ``--state``
    (nor RECONCILER_STATE), the store lives beside the snapshot."""
    explicit = ctx.get_parameter_source("state_url") is not click.core.ParameterSource.DEFAULT
    if snapshot is None or explicit:
        return state_url
    if _is_folder(snapshot):
        return f"sqlite:///{Path(snapshot).resolve() / 'reconciler-state.db'}"
    return f"sqlite:///{Path(snapshot).resolve().with_suffix('.state.db')}"


EXIT_SECOND_LOOK = 3


@dataclass(frozen=True, slots=True)
class _FleetRequest:
    repo: Path
    base_rev: str | None
    head_rev: str | None
    base_path: Path | None
    runtimes: Sequence[str]
    snapshot: str | None
    now: datetime


def _fleet_diff(
    request: _FleetRequest,
    options: ReadOptions,
    access: _Access | None,
    output_format: str,
    details: bool,
    style: Style,
    timings: bool,
) -> None:
    from reconciler.source.review import Review, Side  # imports git: only for fleet diffs

    review = Review(options)
    try:
        if request.base_path is not None:
            base = review.load(Side(request.repo, folder=request.base_path), "base")
        else:
            base = review.load(Side(request.repo, request.base_rev), "base")
        head = review.load(Side(request.repo, request.head_rev), "head")
    except ConfigError as error:
        _report(error)
        sys.exit(EXIT_ERROR)
    live = None
    if access is not None:
        live = review.observe(
            head[0],
            lambda config, name: Lifecycle(
                access.connect(config.runtimes[name].cluster, name),
                system_namespace=config.settings.system_namespace,
            ),
        )
    fleet = _only(review.compare(base, head, request.now, live), request.runtimes)
    with review.timings.phase("render"):
        if output_format == "json":
            text = json.dumps(fleet.to_json(), indent=2, sort_keys=True) + "\n"
        elif output_format == "markdown":
            text = fleet_markdown(fleet)
        else:
            text = fleet_text(fleet, details=details, style=style)
    click.echo(text, nl=False)
    if timings:
        click.echo(f"timings: {review.timings.format()}", err=True)
    if not fleet.has_changes:
        sys.exit(EXIT_OK)
    sys.exit(EXIT_SECOND_LOOK if fleet.needs_second_look else EXIT_INVALID)


def _only(fleet: FleetDiff, names: Sequence[str]) -> FleetDiff:
    if not names:
        return fleet
    kept = tuple(r for r in fleet.runtimes if r.runtime in names)
    return FleetDiff(fleet.base, fleet.head, kept, fleet.unchanged)


def _style(color: bool | None) -> Style:
    enabled = sys.stdout.isatty() if color is None else color
    if not enabled:
        return lambda text, colour: text
    return lambda text, colour: click.style(
        text, fg=None if colour == "bold" else colour, bold=colour == "bold"
    )


@cli.command()
@repo_argument
@runtimes_option
@click.option("--dry-run", is_flag=True, help="Plan and print; no operation, nothing changed.")
@snapshot_option
@kubeconfig_dir_option
@secret_namespace_option
@state_option
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=0,
    show_default=True,
    help="Seconds to keep retrying operations that wait (modules not Ready yet, deletions "
    "blocked); 0 returns at once and the next sync resumes them.",
)
@click.option(
    "--daemon",
    "daemon_url",
    metavar="URL",
    help="Ask a running daemon (http://host:8080) to poll and reconcile now, instead.",
)
@click.option(
    "--secret-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="With --daemon: the daemon's webhook secret.",
)
@allow_option
@click.option(
    "--allow-access-change",
    is_flag=True,
    help="Deprovision runtimes through a different cluster access than the one they were "
    "synced with (a snapshot instead of a real cluster, another API server).",
)
@format_option
@channels_option
@max_size_option
@click.pass_context
def sync(
    ctx: click.Context,
    repo: Path,
    runtime_names: Sequence[str],
    dry_run: bool,
    snapshot: str | None,
    kubeconfig_dir: Path | None,
    secret_namespace: str,
    state_url: str,
    wait: float,
    daemon_url: str | None,
    secret_file: Path | None,
    allow_deletions: Sequence[str],
    allow_access_change: bool,
    output_format: str,
    channels_dir: Path | None,
    max_file_size: int,
) -> None:
    """Run one operation per runtime: provision, update, or deprovision for runtimes that left
    git; an unfinished operation (say, after a crash) is resumed where it stopped.

    Each operation is recorded in the state store with its stages and steps (see `reconciler
    operations`). Deletions (runtimes that left git, modules that left a runtime, CRDs an upgrade
    drops) pass the deletion brake first: over spec.deletionBrake.maxDeletionsPerSync, or every
    runtime at once, nothing is done without --allow-deletions. Exit status: 0 every operation
    succeeded or is waiting to retry, 1 one failed or a module is in Error, 2 a usage, config or
    access error, 3 held by the deletion brake.
    """
    if daemon_url is not None:
        _ask_daemon(daemon_url, secret_file)
        return
    config = _valid_repo(repo, channels_dir, max_file_size)
    store = open_store(_state_url(ctx, state_url, snapshot))
    scope = _scope(config, runtime_names, snapshot, store, allow_deletions)
    access = _Access(kubeconfig_dir, secret_namespace, snapshot)
    if dry_run:
        _dry_run(scope, access, output_format)
        return
    if scope.verdict.held:
        raise HeldByBrakeError(scope.verdict.message)
    _report_brake(scope.verdict)
    engine = Engine(
        store,
        clock=_now,
        disabled=frozenset(config.settings.disabled_steps),
        limits=operation_limits(config.settings),
    )
    runner = Runner(
        store, engine, config, access.connect, _now, allow_access_change=allow_access_change
    )
    operations, errors = [], {}
    for name in scope.targets + scope.removed:
        try:
            operations.append(_run_with_wait(runner, runner.operation_for(name), wait))
        except ReconcilerError as error:
            errors[name] = str(error)
    if output_format == "json":
        document = {
            "operations": [operation_json(o) for o in operations],
            "errors": [{"runtime": r, "error": e} for r, e in sorted(errors.items())],
        }
        click.echo(json.dumps(document, indent=2, sort_keys=True))
    else:
        for operation in operations:
            click.echo(operation_text(operation), nl=False)
        for name, message in sorted(errors.items()):
            click.echo(f"runtime {name}: error: {message}", err=True)
    _report_crashes(ctx, operations, engine.crashes)
    failed = any(o.state is OperationState.FAILED or o.data.has_error for o in operations)
    sys.exit(
        EXIT_ERROR if errors and not operations else EXIT_INVALID if failed or errors else EXIT_OK
    )


def _dry_run(scope: _Scope, access: _Access, fmt: str) -> None:
    results, errors = _plan_all(scope, access, _now())
    if fmt == "json":
        document = results_json(results, errors) | {"deletionBrake": scope.verdict.to_json()}
        click.echo(json.dumps(document, indent=2, sort_keys=True))
    else:
        for result in results:
            click.echo(plan_text(result.plan), nl=False)
        _report_brake(scope.verdict)
        for name, message in sorted(errors.items()):
            click.echo(f"runtime {name}: error: {message}", err=True)
    sys.exit(EXIT_ERROR if errors else EXIT_HELD if scope.verdict.held else EXIT_OK)


def _run_with_wait(runner: Runner, operation: Operation, wait: float) -> Operation:
    deadline = time.monotonic() + wait
    outcome = runner.run(operation)
    while outcome.retry_at is not None:
        delay = (outcome.retry_at - _now()).total_seconds()
        if time.monotonic() + max(delay, 0) > deadline:
            break
        time.sleep(max(delay, 0))
        outcome = runner.run(outcome.operation)
    return outcome.operation


@cli.group()
def operations() -> None:
    """Operations recorded in the state store: list, show, re-trigger."""


@operations.command("list")
@click.option("--runtime", "runtime_name", help="Only this runtime's operations.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@state_option
@format_option
def operations_list(
    runtime_name: str | None, limit: int, state_url: str, output_format: str
) -> None:
    """Operations, newest first: id, runtime, type, state, created, message."""
    found = open_store(state_url).operations(runtime=runtime_name, limit=limit)
    if output_format == "json":
        click.echo(json.dumps([operation_json(o) for o in found], indent=2, sort_keys=True))
        return
    for operation in found:
        click.echo(operation_line(operation))
    if not found:
        click.echo("no operations", err=True)


@operations.command("show")
@click.argument("operation_id")
@state_option
@format_option
def operations_show(operation_id: str, state_url: str, output_format: str) -> None:
    """One operation as a tree: stages, steps, attempts, times, the last message of each step
    (what a blocked deletion waits for), the error that failed it. ID may be a unique prefix."""
    operation = open_store(state_url).get(operation_id)
    if operation is None:
        raise NotFoundError(f"no operation with id (prefix) '{operation_id}'")
    if output_format == "json":
        click.echo(json.dumps(operation_json(operation), indent=2, sort_keys=True))
    else:
        click.echo(operation_tree(operation), nl=False)


@operations.command("retrigger")
@state_option
@allow_option
def operations_retrigger(state_url: str, allow_deletions: Sequence[str]) -> None:
    """Start a new operation for runtimes whose last one skipped steps past their own time
    limit (O5); `reconciler sync` then runs it. Re-triggered deprovisions pass the deletion
    brake (default limit 5; exit 3 when held)."""
    store = open_store(state_url)
    engine = Engine(store, clock=_now, plugins=[])
    candidates = engine.retrigger_candidates()
    removed = tuple(sorted(o.runtime for o in candidates if o.type is OperationType.DEPROVISION))
    verdict = judge(Deletions(runtimes=removed), Settings(), Allowance.parse(allow_deletions))
    if verdict.held:
        raise HeldByBrakeError(verdict.message)
    for operation in engine.retrigger(candidates):
        click.echo(
            f"{operation.id} {operation.type} {operation.runtime} (re-trigger of "
            f"{operation.retrigger_of})"
        )
    if not candidates:
        click.echo("nothing to re-trigger")


@cli.command()
@click.option("--runtime", "runtime_names", multiple=True, help="Only these runtimes.")
@state_option
@format_option
def status(runtime_names: Sequence[str], state_url: str, output_format: str) -> None:
    """Each runtime's and module's state, reason, version, last commit and age, as the last
    operation recorded it."""
    records = [
        r
        for r in open_store(state_url).runtimes()
        if not runtime_names or r.runtime in runtime_names
    ]
    if output_format == "json":
        document = [r.to_json() for r in records]
        click.echo(json.dumps(document, indent=2, sort_keys=True))
        return
    for line in status_lines(records, _now()):
        click.echo(line)
    if not records:
        click.echo("no runtime recorded yet (run reconciler sync)", err=True)


@cli.command()
@click.option(
    "--repo",
    "repo_url",
    required=True,
    envvar="RECONCILER_REPO",
    help="Git URL (https, ssh, git://) or local path of the config repository.",
)
@click.option(
    "--branch",
    default="main",
    show_default=True,
    envvar="RECONCILER_BRANCH",
    help="Branch, tag or commit id to follow.",
)
@click.option(
    "--path",
    "repo_path",
    default=".",
    show_default=True,
    envvar="RECONCILER_PATH",
    help="Folder of the config repo inside the git repository.",
)
@click.option(
    "--interval",
    type=Duration(),
    default="60s",
    show_default="spec.intervals.poll, else 60s",
    envvar="RECONCILER_INTERVAL",
    help="How often to ask the remote whether the ref moved; given here or in the "
    "environment, it overrides spec.intervals.poll of the config repo.",
)
@click.option(
    "--resync-interval",
    type=Duration(),
    default="10m",
    show_default="spec.intervals.resync, else 10m",
    envvar="RECONCILER_RESYNC_INTERVAL",
    help="How often every runtime is reconciled against drift (10% jitter); given here or in "
    "the environment, it overrides spec.intervals.resync of the config repo.",
)
@click.option(
    "--listen",
    default="0.0.0.0:8080",
    callback=_listen_address,
    show_default=True,
    envvar="RECONCILER_LISTEN",
    help="Address of /healthz, /readyz, /metrics, /status and /hooks/git.",
)
@kubeconfig_dir_option
@secret_namespace_option
@state_option
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    envvar="RECONCILER_WORKERS",
    help="Runtimes reconciled at once.",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="RECONCILER_CACHE_DIR",
    help="Where fetched commits are kept (default: next to a SQLite state store; with "
    "PostgreSQL, under the default state folder).",
)
@click.option(
    "--webhook-secret-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    envvar="RECONCILER_WEBHOOK_SECRET_FILE",
    help="Secret of /hooks/git signatures (GitHub) or tokens (GitLab) and of /sync "
    "(without it both answer 403).",
)
@click.option(
    "--allow-unauthenticated-sync",
    is_flag=True,
    envvar="RECONCILER_ALLOW_UNAUTHENTICATED_SYNC",
    help="POST /sync without a token (anyone who reaches the port can ask for a reconcile).",
)
@click.option(
    "--http-read-timeout",
    type=Duration(),
    default="10s",
    show_default=True,
    envvar="RECONCILER_HTTP_READ_TIMEOUT",
    help="A request's headers and body must arrive within it (else 408); idle connections close.",
)
@click.option(
    "--http-max-connections",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    envvar="RECONCILER_HTTP_MAX_CONNECTIONS",
    help="Open HTTP connections at once; more wait to be accepted.",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    envvar="RECONCILER_TOKEN_FILE",
    help="Token for an https remote (never logged).",
)
@click.option(
    "--ssh-key-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    envvar="RECONCILER_SSH_KEY_FILE",
    help="Private key for an ssh remote.",
)
@snapshot_option
@click.option(
    "--allow-deletions",
    "allow_commit",
    default="",
    metavar="COMMIT",
    envvar="RECONCILER_ALLOW_DELETIONS",
    help="Let this one commit (its id, or a prefix of 7 or more characters) pass the deletion "
    "brake; later commits are braked again.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    envvar="RECONCILER_LOG_FORMAT",
)
@click.option(
    "--git-timeout",
    type=Duration(),
    default="60s",
    show_default=True,
    envvar=GIT_TIMEOUT_ENV,
    help="Time limit of each git call to a remote; a call past it is stopped and reported.",
)
@click.pass_context
def daemon(
    ctx: click.Context,
    repo_url: str,
    branch: str,
    repo_path: str,
    interval: float,
    resync_interval: float,
    listen: tuple[str, int],
    kubeconfig_dir: Path | None,
    secret_namespace: str,
    state_url: str,
    workers: int,
    cache_dir: Path | None,
    webhook_secret_file: Path | None,
    allow_unauthenticated_sync: bool,
    http_read_timeout: float,
    http_max_connections: int,
    token_file: Path | None,
    ssh_key_file: Path | None,
    allow_commit: str,
    snapshot: str | None,
    log_format: str,
    git_timeout: float,
) -> None:
    """Follow a git ref and keep every runtime converged until SIGTERM.

    Polls the remote (one cheap check per interval), validates each new commit as a whole
    (an invalid one is refused and the last good one stays in force), holds commits over the
    deletion brake, and runs each runtime's operation on a pool of workers; resyncs every
    runtime for drift. Every option can be set from the environment (RECONCILER_REPO, ...).
    """
    from reconciler.daemon.http import HttpLimits, serve
    from reconciler.daemon.logs import setup_logging
    from reconciler.daemon.service import Daemon, DaemonOptions, start_scheduler
    from reconciler.daemon.signals import StopSignals
    from reconciler.source.git import GitRunner, RemoteSource

    setup_logging(log_format)
    store = open_store(state_url)
    beside = getattr(store, "path", None) or Path(default_state_url().removeprefix("sqlite:///"))
    cache = cache_dir or Path(beside).parent / "git-cache"
    git_env = _git_env(token_file, ssh_key_file)
    git_runner = GitRunner(git_timeout)
    # the command line may name a local path; a commit (channelsFrom.git) may not
    source = RemoteSource(
        repo_url, branch, repo_path, cache, git_env, local=True, runner=git_runner
    )
    access = _Access(kubeconfig_dir, secret_namespace, snapshot)
    options = DaemonOptions(
        workers=workers,
        allow_deletions=allow_commit,
        poll_interval=_given_duration(ctx, "interval", interval),
        resync_interval=_given_duration(ctx, "resync_interval", resync_interval),
        debug=_debugging(click.get_current_context()),
    )

    def second_source(url: str, ref: str, path: str) -> RemoteSource:
        channels_cache = cache.with_name(cache.name + "-channels")
        return RemoteSource(url, ref, path, channels_cache, git_env, runner=git_runner)

    the_daemon = Daemon(source, store, access.connect, _now, options, make_source=second_source)
    secret = webhook_secret_file.read_bytes().strip() if webhook_secret_file else None
    if secret == b"":
        raise click.BadParameter("the file is empty", param_hint="--webhook-secret-file")
    limits = HttpLimits(
        read_timeout=max(1, round(http_read_timeout)), max_connections=http_max_connections
    )
    host, port = listen
    try:
        server = serve(
            the_daemon,
            host,
            port,
            secret,
            allow_unauthenticated_sync=allow_unauthenticated_sync,
            limits=limits,
        )
    except OSError as error:
        the_daemon.close()
        raise AccessError(f"cannot listen on {host}:{port}: {error.strerror or error}") from error
    scheduler = start_scheduler(the_daemon)
    stop = StopSignals()  # whichever thread the kernel hands SIGTERM to, the main one wakes
    stop.install()
    click.echo(
        f"reconciler daemon following {source.shown} {branch} ({repo_path}); "
        f"listening on {host}:{port}",
        err=True,
    )
    stop.wait()
    click.echo("stopping: letting running steps finish", err=True)
    git_runner.stop()  # a poll waiting on a remote ends now, so shutdown does not wait for it
    scheduler.shutdown(wait=True)
    the_daemon.close()
    server.shutdown()
    server.server_close()


def _given_duration(ctx: click.Context, name: str, seconds: float) -> timedelta | None:
    """A duration option given on the command line or in the environment; ``None`` when it
    is its default (the config repo's setting then applies)."""
    source = ctx.get_parameter_source(name)
    given = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)
    return timedelta(seconds=seconds) if source in given else None


def _git_timeout(text: str) -> float:
    """Seconds of a ``--git-timeout`` / ``RECONCILER_GIT_TIMEOUT`` duration such as ``60s``."""
    try:
        seconds = parse_duration(text.strip())
    except ValueError:
        seconds = 0.0
    if seconds <= 0:
        raise click.BadParameter(
            f"git timeout must be a duration above zero such as 60s or 2m ({GIT_TIMEOUT_ENV})"
        )
    return seconds


def _ask_daemon(url: str, secret_file: Path | None) -> None:
    """POST /sync to a running daemon."""
    import urllib.error
    import urllib.request

    headers = {}
    if secret_file is not None:
        headers["Authorization"] = "Bearer " + secret_file.read_text().strip()
    if not url.startswith(("http://", "https://")):
        raise click.UsageError("--daemon needs an http:// or https:// URL")
    request = urllib.request.Request(  # noqa: S310 (http and https only, checked above)
        url.rstrip("/") + "/sync", data=b"", headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (http only)
            click.echo(f"daemon at {url}: reconcile requested ({response.status})")
    except urllib.error.HTTPError as error:
        raise AccessError(f"the daemon at {url} refused: {_refusal(error)}") from error
    except (urllib.error.URLError, OSError) as error:
        raise AccessError(f"cannot reach the daemon at {url}: {error}") from error
    sys.exit(EXIT_OK)


def _refusal(error: Any) -> str:
    """An HTTP error answer of the daemon as ``403 <its error message>``."""
    try:
        message = str(json.loads(error.read(4096))["error"])
    except (OSError, ValueError, KeyError, TypeError):
        message = str(error.reason)
    return f"{error.code} {message}"


def _git_env(token_file: Path | None, ssh_key_file: Path | None) -> dict[str, str]:
    """Environment for git: a bearer token header for https, a key for ssh; never logged."""
    env: dict[str, str] = {"GIT_TERMINAL_PROMPT": "0"}
    if token_file is not None:
        token = token_file.read_text().strip()
        env.update(
            {
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": "http.extraHeader",
                "GIT_CONFIG_VALUE_0": f"Authorization: Bearer {token}",
            }
        )
    if ssh_key_file is not None:
        env["GIT_SSH_COMMAND"] = f"ssh -i {ssh_key_file} -o IdentitiesOnly=yes"
    return env


def _targets(
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
    if snapshot is not None and not _is_folder(snapshot) and len(chosen) > 1:
        raise click.UsageError(
            "--snapshot FILE holds one cluster: name one --runtime, or give a folder of "
            "<runtime>.yaml files"
        )
    return chosen


class _Access:
    """How the CLI reaches each runtime's cluster: a live one, or a snapshot file."""

    def __init__(
        self, kubeconfig_dir: Path | None, secret_namespace: str, snapshot: str | None = None
    ) -> None:
        self.kubeconfig_dir = kubeconfig_dir
        self.secret_namespace = secret_namespace
        self.snapshot = snapshot

    def connect(self, access: ClusterAccess, name: str) -> Cluster:
        """The cluster of runtime ``name``; with a snapshot, its file, saved after each change."""
        if self.snapshot is not None:
            return SnapshotFileCluster(_snapshot_file(self.snapshot, name))
        from reconciler.cluster.kube import connect  # the client is imported only when needed

        return connect(
            access,
            name=name,
            kubeconfig_dir=self.kubeconfig_dir,
            secret_namespace=self.secret_namespace,
        )


def _is_folder(snapshot: str) -> bool:
    return snapshot.endswith("/") or Path(snapshot).is_dir()


def _snapshot_file(snapshot: str, runtime: str) -> Path:
    return Path(snapshot) / f"{runtime}.yaml" if _is_folder(snapshot) else Path(snapshot)


def _now() -> datetime:
    return datetime.now(UTC)


def render_stream(config: ConfigRepo, resolution: Resolution, modules: Sequence[str]) -> str:
    """The YAML stream of ``render``: a comment per module, then its objects."""
    renderer = Renderer(config)
    chunks = [f"# runtime {resolution.runtime.name} (channel {resolution.runtime.channel})\n"]
    for resolved in resolution.modules:
        if modules and resolved.name not in modules:
            continue
        chunks.append(
            f"# module {resolved.name} {resolved.version}: {resolved.origin()}, "
            f"{resolved.reason()}, strategy {resolved.strategy}\n"
        )
        single = Resolution(resolution.runtime, (resolved,))
        for rendered in renderer.render(single):
            chunks.append("---\n")
            chunks.append(yaml.dump(dict(rendered.body), Dumper=_Dumper, sort_keys=False))
    return "".join(chunks)


def _load(repo: Path, channels_dir: Path | None, max_file_size: int) -> Validation:
    options = ReadOptions(max_file_size=max_file_size, channels_dir=channels_dir)
    if channels_dir is None and repo.is_dir():
        options = _with_git_channels(repo, options)
    return load_repo(repo, options)


def _with_git_channels(repo: Path, options: ReadOptions) -> ReadOptions:
    """``channelsFrom.git``: fetch the channels repository's ref into the user's cache, within
    the git time limit (``RECONCILER_GIT_TIMEOUT``). A remote git may not fetch for a commit
    is never fetched (``channels_repository`` leaves it out; validation reports it)."""
    wanted = channels_repository(repo)
    if wanted is None:
        return options
    import hashlib

    from reconciler.source.git import GitRunner, RemoteSource  # imports git: only when needed

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    key = hashlib.sha256(wanted.url.encode()).hexdigest()[:16]
    source = RemoteSource(
        wanted.url,
        wanted.ref,
        wanted.sub_path,
        Path(base) / "reconciler" / f"channels-{key}",
        {"GIT_TERMINAL_PROMPT": "0"},
        runner=GitRunner(_git_timeout(os.environ.get(GIT_TIMEOUT_ENV, "60s"))),
    )
    commit = source.check()
    tree = source.revision(commit).tree
    return replace(options, channels_tree=tree, channels_label=f"{source.shown}@{commit[:12]}")


def _valid_repo(repo: Path, channels_dir: Path | None, max_file_size: int) -> ConfigRepo:
    validation = _load(repo, channels_dir, max_file_size)
    if validation.repo is None:
        raise ConfigError(validation.diagnostics)
    return validation.repo


def _summary(repo: Path, validation: Validation) -> str:
    if validation.repo is not None:
        config = validation.repo
        versions = sum(len(m.versions) for m in config.modules.values())
        return (
            f"{repo}: valid: {len(config.runtimes)} runtimes, {len(config.modules)} modules "
            f"({versions} versions), {len(config.channels)} channels, {validation.files} files"
        )
    files = len({d.path for d in validation.diagnostics})
    count = len(validation.diagnostics)
    return f"{repo}: {count} error{'s' * (count != 1)} in {files} file{'s' * (files != 1)}"


def _validation_json(repo: Path, validation: Validation) -> dict[str, Any]:
    result: dict[str, Any] = {
        "repo": str(repo),
        "valid": validation.valid,
        "files": validation.files,
        "errors": [d.to_json() for d in validation.diagnostics],
    }
    if validation.repo is not None:
        result["runtimes"] = sorted(validation.repo.runtimes)
        result["modules"] = {
            name: sorted_versions(list(m.versions))
            for name, m in sorted(validation.repo.modules.items())
        }
        result["channels"] = sorted(validation.repo.channels)
    return result


def _report(error: ReconcilerError) -> int:
    """Print ``error`` for people; the exit status its type carries."""
    if isinstance(error, ConfigError):
        for diagnostic in error.diagnostics:
            click.echo(diagnostic.format(), err=True)
        count = len(error.diagnostics)
        where = f" at {error.side}" if error.side else ""
        click.echo(f"the config repo{where} is invalid ({count} errors); nothing done", err=True)
        return EXIT_INVALID
    if isinstance(error, HeldByBrakeError):
        click.echo(str(error), err=True)
        return EXIT_HELD
    click.echo(f"error: {error}", err=True)
    return EXIT_ERROR


def _debugging(ctx: click.Context) -> bool:
    return bool(ctx.find_root().params.get("debug"))


def _report_internal(ctx: click.Context, error: Exception) -> int:
    """An unexpected exception outside the steps: one line (the traceback with --debug)."""
    crash = Crash.of(error)
    if _debugging(ctx):
        click.echo(crash.traceback(), err=True, nl=False)
        click.echo(f"error: internal error: {crash.type}: {crash.message}", err=True)
    else:
        click.echo(
            f"error: internal error: {crash.type}: {crash.message} "
            "(run with --debug for the traceback)",
            err=True,
        )
    return EXIT_ERROR


def _report_crashes(
    ctx: click.Context, operations: Sequence[Operation], crashes: Mapping[str, Crash]
) -> None:
    """One line per operation a step's unexpected exception failed (tracebacks with --debug)."""
    for operation in operations:
        crash = crashes.get(operation.id)
        if crash is None:
            continue
        if _debugging(ctx):
            click.echo(crash.traceback(), err=True, nl=False)
        click.echo(
            f"runtime {operation.runtime}: operation {operation.id} failed: {crash.describe()}; "
            f"details: reconciler operations show {operation.id}",
            err=True,
        )


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="reconciler")
