"""``reconciler operations list|show|retrigger|prune``: the operations recorded in the state
store."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import click

from reconciler.cli import exits
from reconciler.cli.options import (
    allow_option,
    retention_of,
    retention_options,
    state_option,
)
from reconciler.cli.output import (
    Column,
    echo_document,
    is_document,
    no_headers_option,
    output_option,
    table_lines,
)
from reconciler.errors import HeldByBrakeError, NotFoundError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.operations.model import Operation, Retention


@click.group()
def operations() -> None:
    """Operations recorded in the state store: list, show, re-trigger, prune."""


@operations.command("list", epilog=exits.RECORDS.describe())
@click.option("--runtime", "runtime_name", help="Only this runtime's operations.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@state_option
@output_option("text", "wide", "json", "yaml")
@no_headers_option
def operations_list(
    runtime_name: str | None, limit: int, state_url: str, output_format: str, no_headers: bool
) -> None:
    """Operations, newest first: id, runtime, type, state, created, message."""
    from reconciler.operations.store import open_existing_store

    store = open_existing_store(state_url)
    found = store.operations(runtime=runtime_name, limit=limit) if store is not None else []
    print_operations(found, output_format, no_headers)


def print_operations(found: Sequence[Operation], output_format: str, no_headers: bool) -> None:
    """Operations as a table (``text``, ``wide``) or an ``OperationList`` document."""
    from reconciler.operations.report import (
        OPERATION_COLUMNS,
        OPERATION_WIDE_COLUMNS,
        operation_json,
        operation_row,
    )

    if is_document(output_format):
        items = [operation_json(o) for o in found]
        echo_document("OperationList", {"items": items}, output_format)
        return
    if not found:
        click.echo("no operations", err=True)
        return
    columns = [Column(h) for h in OPERATION_COLUMNS]
    columns += [Column(h, wide=True) for h in OPERATION_WIDE_COLUMNS]
    rows = [operation_row(o) for o in found]
    for line in table_lines(columns, rows, wide=output_format == "wide", headers=not no_headers):
        click.echo(line)


@operations.command("show", epilog=exits.RECORDS.describe())
@click.argument("operation_id")
@state_option
@output_option("text", "json", "yaml")
def operations_show(operation_id: str, state_url: str, output_format: str) -> None:
    """One operation as a tree: stages, steps, attempts, times, the last message of each step
    (what a blocked deletion waits for), the error that failed it. ID may be a unique prefix."""
    from reconciler.operations.report import operation_json, operation_tree
    from reconciler.operations.store import open_existing_store

    store = open_existing_store(state_url)
    operation = store.get(operation_id) if store is not None else None
    if operation is None:
        raise NotFoundError(f"no operation with id (prefix) '{operation_id}'")
    if is_document(output_format):
        echo_document("Operation", operation_json(operation), output_format)
    else:
        click.echo(operation_tree(operation), nl=False)


@operations.command("retrigger", epilog=exits.RETRIGGER.describe())
@state_option
@allow_option
def operations_retrigger(state_url: str, allow_deletions: Sequence[str]) -> None:
    """Start a new operation for runtimes whose last one skipped steps past their own time
    limit (O5); `reconciler sync` then runs it. Re-triggered deprovisions pass the deletion
    brake (default limit 5)."""
    from reconciler.cli.clusters import now as _now
    from reconciler.core.brake import Allowance, Deletions, Limits, judge
    from reconciler.operations.engine import Engine
    from reconciler.operations.model import OperationType
    from reconciler.operations.store import open_store

    store = open_store(state_url)
    engine = Engine(store, clock=_now, plugins=[])
    candidates = engine.retrigger_candidates()
    removed = tuple(sorted(o.runtime for o in candidates if o.type is OperationType.DEPROVISION))
    verdict = judge(Deletions(runtimes=removed), Limits(), Allowance.parse(allow_deletions))
    if verdict.held:
        raise HeldByBrakeError(verdict.message)
    for operation in engine.retrigger(candidates):
        click.echo(
            f"{operation.id} {operation.type} {operation.runtime} (re-trigger of "
            f"{operation.retrigger_of})"
        )
    if not candidates:
        click.echo("nothing to re-trigger")


#: ``operations prune`` says how far it got after each this many operations removed.
PROGRESS_EVERY = 5000


@operations.command("prune", epilog=exits.PRUNE.describe())
@retention_options
@click.option(
    "--dry-run",
    is_flag=True,
    help="Only list what would be removed (operations per runtime, and the total).",
)
@state_option
def operations_prune(
    keep_operations: int, keep_failures: float, dry_run: bool, state_url: str
) -> None:
    """Remove the finished operations the retention flags do not keep, with their stages and
    steps, as the daemon's hourly pruning job does: for a store that `reconciler sync` fills,
    or one no daemon runs on any more. Pending and in-progress operations are never removed;
    running it beside a daemon on the same store is harmless."""
    from reconciler.cli.clusters import now as _now
    from reconciler.operations.store import open_existing_store

    retention = retention_of(keep_operations, keep_failures)
    store = open_existing_store(state_url)
    if store is None:
        click.echo("nothing to prune: no state store there yet")
        return
    if dry_run:
        _print_prunable(store.prunable(retention, _now()), retention)
        return
    removed = store.prune(retention, _now(), _progress_printer())
    click.echo(f"pruned {removed} operations ({kept_text(retention)})")


def _print_prunable(counts: Mapping[str, int], retention: Retention) -> None:
    """``--dry-run``: a row per runtime with operations to remove, then the total."""
    rows = [(runtime, str(count)) for runtime, count in counts.items()]
    for line in table_lines([Column("RUNTIME"), Column("OPERATIONS")], rows) if rows else []:
        click.echo(line)
    total = sum(counts.values())
    click.echo(
        f"would prune {total} operations of {len(counts)} runtimes ({kept_text(retention)}); "
        "nothing removed (--dry-run)"
    )


def _progress_printer() -> Callable[[int], None]:
    """Tells ``operations prune``'s count on stderr each time it passes a multiple of
    :data:`PROGRESS_EVERY`."""
    shown = [0]

    def progress(removed: int) -> None:
        if removed // PROGRESS_EVERY > shown[0] // PROGRESS_EVERY:
            click.echo(f"pruning: {removed} operations removed so far", err=True)
            shown[0] = removed

    return progress


def kept_text(retention: Retention) -> str:
    """``keeping the newest 10 per runtime, failures for 168h``: what ``retention`` keeps."""
    from reconciler.core.durations import duration_text

    return (
        f"keeping the newest {retention.keep_per_runtime} per runtime, failures for "
        f"{duration_text(retention.keep_failures_for)}"
    )
