"""``reconciler status``: each runtime's and module's state as the last operation recorded it."""

from __future__ import annotations

import json
from collections.abc import Sequence

import click

from reconciler.cli import exits
from reconciler.cli.options import format_option, state_option


@click.command(epilog=exits.RECORDS.describe())
@click.option("--runtime", "runtime_names", multiple=True, help="Only these runtimes.")
@state_option
@format_option
def status(runtime_names: Sequence[str], state_url: str, output_format: str) -> None:
    """Each runtime's and module's state, reason, version, last commit and age, as the last
    operation recorded it."""
    from reconciler.cli.clusters import now as _now
    from reconciler.operations.report import status_lines
    from reconciler.operations.store import load_statuses, open_existing_store

    store = open_existing_store(state_url)  # a read: never creates a store
    records = load_statuses(store, runtime_names) if store is not None else []
    if output_format == "json":
        document = [r.to_json() for r in records]
        click.echo(json.dumps(document, indent=2, sort_keys=True))
        return
    for line in status_lines(records, _now()):
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
