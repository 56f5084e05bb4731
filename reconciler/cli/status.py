"""``reconciler status``: each runtime's and module's state as the last operation recorded it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from reconciler.cli import exits
from reconciler.cli.options import format_option, state_option

if TYPE_CHECKING:
    from reconciler.operations.model import Suspension


@click.command(epilog=exits.RECORDS.describe())
@click.option("--runtime", "runtime_names", multiple=True, help="Only these runtimes.")
@state_option
@format_option
def status(runtime_names: Sequence[str], state_url: str, output_format: str) -> None:
    """Each runtime's and module's state, reason, version, last commit and age, as the last
    operation recorded it."""
    from reconciler.cli.clusters import now as _now
    from reconciler.operations.report import status_lines
    from reconciler.operations.store import load_statuses, open_store

    store = open_store(state_url)
    records = load_statuses(store, runtime_names)
    suspended = {
        name: s
        for name, s in store.suspensions().items()
        if not runtime_names or name in runtime_names
    }
    if output_format == "json":
        document = [
            {**r.to_json(), "suspension": _suspension_json(suspended.get(r.current.runtime))}
            for r in records
        ]
        click.echo(json.dumps(document, indent=2, sort_keys=True))
        return
    for line in status_lines(records, _now()):
        click.echo(line)
    for name, suspension in sorted(suspended.items()):
        click.echo(f"{name}: {suspension.describe()} (reconciler resume {name})")
    if not records:
        click.echo("no runtime recorded yet (run reconciler sync)", err=True)


def _suspension_json(suspension: Suspension | None) -> dict[str, str] | None:
    if suspension is None:
        return None
    return {"since": suspension.since.isoformat(), "reason": suspension.reason}
