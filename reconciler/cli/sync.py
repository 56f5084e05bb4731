"""``reconciler sync``: one recorded, resumable operation per runtime (or a dry run that plans
and prints only, or a request to a running daemon)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from reconciler.cli import exits
from reconciler.cli.options import (
    ClusterOptions,
    RepoInput,
    RunRequest,
    allow_option,
    channels_option,
    cluster_options,
    debugging,
    max_size_option,
    parallel_option,
    repo_argument,
    runtimes_option,
    state_option,
)
from reconciler.cli.output import echo_document, is_document, output_option
from reconciler.cli.progress import Progress, announce_repo
from reconciler.errors import HeldByBrakeError, ReconcilerError

#: How soon ``sync`` runs a waiting operation again first, and at most (doubled in between).
POLL_FIRST = 0.05
POLL_MAX = 1.0

if TYPE_CHECKING:
    from reconciler.cli.clusters import Access
    from reconciler.cli.plans import Scope
    from reconciler.cli.workers import RampUp
    from reconciler.operations.crash import Crash
    from reconciler.operations.model import Operation
    from reconciler.operations.runner import Runner


@click.command(epilog=exits.SYNC.describe())
@repo_argument
@runtimes_option
@click.option("--dry-run", is_flag=True, help="Plan and print; no operation, nothing changed.")
@cluster_options(create=True)
@state_option
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=0,
    show_default=True,
    help="Seconds to keep running operations that wait (modules not Ready yet, deletions "
    "blocked) again; 0 returns once they wait for nothing but their operators or users' "
    "objects (CRDs being Established and deletions the server finishes are waited for, "
    "30 s and 10 s at most), and the next sync resumes them.",
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
@parallel_option
@output_option(
    "text",
    "json",
    "yaml",
    help="text: each runtime as it finishes; json/yaml: one "
    "document at the end (docs/json-output.md).",
)
@channels_option
@max_size_option
@click.pass_context
def sync(
    ctx: click.Context,
    repo: Path,
    runtime_names: Sequence[str],
    dry_run: bool,
    clusters: ClusterOptions,
    state_url: str,
    wait: float,
    daemon_url: str | None,
    secret_file: Path | None,
    allow_deletions: Sequence[str],
    allow_access_change: bool,
    parallel: int,
    output_format: str,
    channels_dir: Path | None,
    max_file_size: int,
) -> None:
    """Run one operation per runtime: provision, update, or deprovision for runtimes that left
    git; an unfinished operation (say, after a crash) is resumed where it stopped.

    Each operation is recorded in the state store with its stages and steps (see `reconciler
    operations`). Deletions (runtimes that left git, modules that left a runtime, CRDs an upgrade
    drops) pass the deletion brake first: over spec.deletionBrake.maxDeletionsPerSync, or every
    runtime at once, nothing is done without --allow-deletions.
    """
    if daemon_url is not None:
        from reconciler.cli.daemon_client import request_sync

        request_sync(daemon_url, secret_file)
        return
    announce_repo(repo, sys.stderr)
    from reconciler.cli.clusters import state_url_for

    source = RepoInput(repo, channels_dir, max_file_size)
    clusters.check_one_runtime(runtime_names)
    store_url = state_url_for(ctx, state_url, clusters.snapshot)
    run = RunRequest(source, clusters, store_url, runtime_names, allow_deletions)
    if dry_run:
        sys.exit(dry_run_sync(run, output_format, parallel))
    options = SyncOptions(wait, allow_access_change, output_format, debugging(ctx), parallel)
    sys.exit(run_sync(run, options))


def dry_run_sync(run: RunRequest, output_format: str, parallel: int = 1) -> int:
    """Plan and print what a sync would do; the exit status of ``sync --dry-run``."""
    from reconciler.cli.clusters import now
    from reconciler.cli.plans import PlanView, open_scope, show_plans
    from reconciler.cli.report import results_json

    scope = open_scope(run, parallel, to_change=False, document=is_document(output_format))
    view = PlanView(output_format, True, results_json, "SyncPlan")
    planned = show_plans(scope, scope.access, now(), view, parallel)
    return planned.exit_status(changes=exits.OK)


@dataclass(frozen=True, slots=True)
class SyncOptions:
    """How operations run and are shown (``--wait``, ``--allow-access-change``, ``--format``,
    the global ``--debug``)."""

    wait: float
    allow_access_change: bool
    output_format: str
    debug: bool = False
    #: Runtimes synced at once (``--parallel``).
    parallel: int = 1
    #: ``reconcile --wait``: an operation still under way when ``wait`` runs out fails the run.
    must_finish: bool = False


def run_sync(run: RunRequest, options: SyncOptions) -> int:
    """Run (or resume) each runtime's operation, ``options.parallel`` runtimes at a time, and
    print each as it finishes; the exit status of ``sync``."""
    from reconciler.cli.plans import open_scope, record_limits, report_brake
    from reconciler.cli.workers import fleet_width

    scope = open_scope(run, options.parallel, document=is_document(options.output_format))
    if scope.verdict.held:
        raise HeldByBrakeError(scope.verdict.message)
    report_brake(scope.verdict)
    if not run.runtime_names:  # the whole fleet went ahead: its limits are in force now
        record_limits(scope)
    access = scope.access
    runner = _runner(scope, access, options.allow_access_change)
    fleet = _Fleet(runner, access, options, _progress(len(scope.runtimes)))
    fleet.run(scope.runtimes, fleet_width(options.parallel, run.clusters.snapshot))
    if is_document(options.output_format):
        _print_operations(fleet.operations, fleet.errors, options.output_format)
    failed = any(_failed(o) for o in fleet.operations)
    if options.must_finish and not failed:
        failed = _report_unfinished(fleet.operations, options.wait)
    if fleet.interrupted:
        return exits.INTERRUPTED
    if fleet.errors and not fleet.operations:
        return exits.USAGE
    return exits.SYNC_FAILED if failed or fleet.errors else exits.OK


def _report_unfinished(operations: Sequence[Operation], waited: float) -> bool:
    """Name the operations still under way after ``waited`` seconds; whether there are any."""
    from reconciler.operations.model import OperationState

    unfinished = [o for o in operations if o.state is not OperationState.SUCCEEDED]
    for operation in unfinished:
        click.echo(
            f"runtime {operation.runtime}: operation {operation.id} still under way after "
            f"{waited:g}s: {operation.message} (reconciler operations show {operation.id})",
            err=True,
        )
    return bool(unfinished)


def _progress(total: int) -> Progress:
    return Progress(total, sys.stderr, time.monotonic, terminal=sys.stderr.isatty())


class _Fleet:
    """Runtimes synced on a pool of threads (the work waits on API servers and the store),
    each printed as it finishes, with progress and a summary on standard error. Ctrl-C stops
    starting runtimes, lets those under way end their current run (their operations stay
    resumable) and says so."""

    def __init__(
        self, runner: Runner, access: Access, options: SyncOptions, progress: Progress
    ) -> None:
        self.runner, self.access, self.options, self.progress = runner, access, options, progress
        self.operations: list[Operation] = []
        self.errors: dict[str, str] = {}
        self.interrupted = False
        self._stop = threading.Event()

    def run(self, names: Sequence[str], parallel: int) -> None:
        """Sync every runtime of ``names``."""
        from concurrent.futures import ThreadPoolExecutor

        from reconciler.cli.workers import RampUp

        ramp = RampUp(parallel, time.monotonic)
        pool = ThreadPoolExecutor(max_workers=ramp.limit, thread_name_prefix="sync")
        futures = [pool.submit(self._one, name, ramp) for name in names]
        try:
            for future in futures:
                future.result()
        except KeyboardInterrupt:
            self.interrupted = True
            self._stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            self.progress.close("interrupted: the rest were not started; sync again to go on")
            return
        pool.shutdown(wait=True)
        self.progress.close(summary=len(names) > 1)  # one runtime's result says it all

    def _one(self, name: str, ramp: RampUp) -> None:
        with ramp.slot():
            self._sync(name)

    def _sync(self, name: str) -> None:
        if self._stop.is_set():
            return
        try:
            done = _sync_runtime(self.runner, name, self.options.wait, self._stop)
        except ReconcilerError as error:
            self.errors[name] = str(error)
            self.progress.finished("failed", f"runtime {name}: error: {error}\n", sys.stderr)
            return
        finally:
            self.access.release(name)
        self.operations.extend(done)
        self.progress.finished(_outcome(done[-1]), self._text(done), sys.stdout)
        _report_crashes(done, self.runner.engine.crashes, debug=self.options.debug)

    def _text(self, done: Sequence[Operation]) -> str:
        if is_document(self.options.output_format):
            return ""
        from reconciler.operations.report import operation_text

        return "".join(operation_text(o) for o in done)


def _outcome(operation: Operation) -> str:
    """How a runtime's run ended, for the progress counts."""
    from reconciler.operations.model import OperationState

    if _failed(operation):
        return "failed"
    return "waiting" if operation.state is not OperationState.SUCCEEDED else "done"


def _runner(scope: Scope, access: Access, allow_access_change: bool) -> Runner:
    from reconciler.cli.clusters import now
    from reconciler.operations.engine import Engine
    from reconciler.operations.model import operation_limits
    from reconciler.operations.runner import Runner

    config = scope.config
    engine = Engine(
        scope.store,
        clock=now,
        disabled=frozenset(config.settings.disabled_steps),
        limits=operation_limits(config.settings),
        retry_limits=config.settings.retry_limits,
    )
    return Runner(
        scope.store,
        engine,
        config,
        access.connect,
        now,
        allow_access_change=allow_access_change,
        charts=scope.charts,
    )


def _print_operations(
    operations: Sequence[Operation], errors: dict[str, str], output_format: str
) -> None:
    """The document of a sync (text is printed per runtime as each finishes)."""
    from reconciler.operations.report import operation_json

    document = {
        "operations": [operation_json(o) for o in sorted(operations, key=_by_runtime)],
        "errors": [{"runtime": r, "error": e} for r, e in sorted(errors.items())],
    }
    echo_document("SyncReport", document, output_format)


def _by_runtime(operation: Operation) -> tuple[str, datetime]:
    return operation.runtime, operation.created


def _sync_runtime(runner: Runner, name: str, wait: float, stop: threading.Event) -> list[Operation]:
    """The operation of runtime ``name``, run; a resumed one that finished is followed by the
    operation for the repo's current state (which a change made while it waited needs)."""
    done = [_run_with_wait(runner, runner.operation_for(name), wait, stop)]
    follow_up = runner.follow_up(done[0])
    if follow_up is not None and not stop.is_set():
        done.append(_run_with_wait(runner, follow_up, wait, stop))
    return done


def _run_with_wait(
    runner: Runner, operation: Operation, wait: float, stop: threading.Event
) -> Operation:
    """Run ``operation``; while it waits, run it again (a pass never waits: the command
    polls, every 50 ms doubled up to 1 s, or sooner when the operation asks; after a
    transient error, when it asks: a 429's ``Retry-After``) for ``wait``
    seconds at most, and at least as long as it waits for what the server finishes by itself
    (:func:`~reconciler.operations.settling.settle_seconds`: CRDs to be Established, what a
    removal deleted to be gone); until ``stop`` is set (Ctrl-C)."""
    from reconciler.cli.clusters import now
    from reconciler.operations.settling import settle_seconds

    started = time.monotonic()
    outcome = runner.run(operation)
    poll = POLL_FIRST
    while outcome.retry_at is not None:
        budget = max(wait, settle_seconds(outcome.operation.data))  # what it waits for now
        asked = max((outcome.retry_at - now()).total_seconds(), 0)
        failed = outcome.operation.data.failure is not None  # an error's delay is kept to
        delay = asked if failed else min(poll, asked)
        if time.monotonic() + delay > started + budget or stop.wait(delay):
            break
        outcome = runner.run(outcome.operation)
        poll = min(poll * 2, POLL_MAX)
    return outcome.operation


def _report_crashes(
    operations: Sequence[Operation], crashes: Mapping[str, Crash], *, debug: bool
) -> None:
    """One line per operation a step's unexpected exception failed (tracebacks with --debug)."""
    for operation in operations:
        crash = crashes.get(operation.id)
        if crash is None:
            continue
        if debug:
            click.echo(crash.traceback(), err=True, nl=False)
        click.echo(
            f"runtime {operation.runtime}: operation {operation.id} failed: {crash.describe()}; "
            f"details: reconciler operations show {operation.id}",
            err=True,
        )


def _failed(operation: Operation) -> bool:
    """Failed, or a module in Error."""
    from reconciler.operations.model import OperationState

    return operation.state is OperationState.FAILED or operation.data.has_error
