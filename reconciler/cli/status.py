"""``reconciler status``: each runtime's and module's state as the last operation recorded it."""

from __future__ import annotations

from collections.abc import Sequence

import click

from reconciler.cli import exits
from reconciler.cli.options import missing_store_error, state_given, state_option
from reconciler.cli.output import (
    Column,
    echo_document,
    is_document,
    no_headers_option,
    output_option,
    table_lines,
)


@click.command(epilog=exits.RECORDS.describe())
@click.pass_context
@click.option("--runtime", "runtime_names", multiple=True, help="Only these runtimes.")
@state_option
@output_option("text", "wide", "json", "yaml")
@no_headers_option
def status(
    ctx: click.Context,
    runtime_names: Sequence[str],
    state_url: str,
    output_format: str,
    no_headers: bool,
) -> None:
    """Each runtime's and module's state, reason, version, last commit and age, as its newest
    operation (finished or not) shows it; under a runtime, each of its modules."""
    from reconciler.cli.clusters import now as _now
    from reconciler.operations.report import STATUS_COLUMNS, STATUS_WIDE_COLUMNS, status_rows
    from reconciler.operations.store import load_statuses, open_existing_store

    store = open_existing_store(state_url)  # a read: never creates a store
    if store is None and state_given(ctx):
        raise missing_store_error(state_url)
    if runtime_names:
        from reconciler.cli.names import check_runtime
        from reconciler.core.redaction import mask_url_password

        known = store.runtime_names() if store is not None else []
        for name in runtime_names:
            check_runtime(name, known, f"the state store {mask_url_password(state_url)}")
    records = load_statuses(store, runtime_names) if store is not None else []
    if is_document(output_format):
        items = [r.to_json() for r in records]
        echo_document("RuntimeStatusList", {"items": items}, output_format)
        return
    columns = [Column(h) for h in STATUS_COLUMNS] + [Column(h, True) for h in STATUS_WIDE_COLUMNS]
    rows = status_rows(records, _now())
    for line in table_lines(columns, rows, wide=output_format == "wide", headers=not no_headers):
        if rows:
            click.echo(line)
    for record in records:
        if record.suspension is not None:
            name = record.current.runtime
            click.echo(f"{name}: {record.suspension.describe()} (reconciler resume {name})")
    if store is None:
        click.echo(
            f"no runtime recorded yet: no state store at {state_url} (run reconciler sync)",
            err=True,
        )
    elif not records:
        click.echo("no runtime recorded yet (run reconciler sync)", err=True)
