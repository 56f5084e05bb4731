"""``reconciler members``: the daemon replicas sharing a state store, with their last
heartbeat, epoch, and how many runtimes each owns (as every replica computes it)."""

from __future__ import annotations

from typing import Any

import click

from reconciler.cli import exits
from reconciler.cli.options import Duration, state_option
from reconciler.cli.output import (
    Column,
    echo_document,
    is_document,
    no_headers_option,
    output_option,
    table_lines,
)

COLUMNS = [Column("NAME"), Column("LIVE"), Column("EPOCH"), Column("HEARTBEAT"), Column("RUNTIMES")]


@click.command(epilog=exits.RECORDS.describe())
@state_option
@click.option(
    "--lease",
    type=Duration(),
    default="30s",
    show_default=True,
    help="The members' lease (the daemons' --lease): older heartbeats are dead members.",
)
@output_option("text", "json", "yaml")
@no_headers_option
def members(state_url: str, lease: float, output_format: str, no_headers: bool) -> None:
    """The daemon replicas sharing the state store: alive or not, epoch, last heartbeat, and
    how many runtimes each owns."""
    from datetime import timedelta

    from reconciler.cli.clusters import now
    from reconciler.core.sharding import assign
    from reconciler.operations.report import age_text
    from reconciler.operations.store import open_existing_store

    store = open_existing_store(state_url)
    found = store.members() if store is not None else []
    when, span = now(), timedelta(seconds=lease)
    live = [m.name for m in found if m.live(when, span)]
    runtimes = [r.runtime for r in store.runtimes()] if store is not None else []
    owned = list(assign(runtimes, live).values())
    items: list[dict[str, Any]] = [
        {
            "name": m.name,
            "live": m.live(when, span),
            "epoch": m.epoch,
            "heartbeat": m.heartbeat.isoformat(),
            "started": m.started.isoformat(),
            "runtimes": owned.count(m.name),
        }
        for m in found
    ]
    if is_document(output_format):
        echo_document("MemberList", {"items": items}, output_format)
        return
    if not items:
        click.echo("no member: no daemon shares this state store", err=True)
        return
    rows = [
        (
            m.name,
            "yes" if item["live"] else "no",
            str(m.epoch),
            age_text(when, m.heartbeat) + " ago",
            str(item["runtimes"]),
        )
        for m, item in zip(found, items, strict=True)
    ]
    for line in table_lines(COLUMNS, rows, headers=not no_headers):
        click.echo(line)
