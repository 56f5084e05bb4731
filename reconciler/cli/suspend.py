"""``reconciler suspend RUNTIME`` and ``reconciler resume RUNTIME``: stop changing a runtime's
cluster in an emergency, and go on again (as ``flux suspend``/``flux resume``).

The suspension is recorded in the state store, so ``sync`` and every daemon sharing that store
honour it from their next run of the runtime: its operations plan nothing and change nothing
(deletions included), and ``status`` shows it. ``spec.suspend: true`` in git suspends too and
wins: ``resume`` lifts only the suspension made here.
"""

from __future__ import annotations

import click

from reconciler.cli import exits
from reconciler.cli.options import state_option
from reconciler.core.model import is_runtime_name


def _runtime_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not is_runtime_name(value):
        raise click.BadParameter(f"{value[:70]!r} is not a runtime name (a DNS-1123 label)")
    return value


@click.command(epilog=exits.SUSPEND.describe())
@click.argument("runtime", callback=_runtime_name)
@click.option("--reason", default="", help="Why, shown by status (say who and what for).")
@state_option
def suspend(runtime: str, reason: str, state_url: str) -> None:
    """Stop changing RUNTIME's cluster until `reconciler resume RUNTIME`.

    Recorded in the state store: sync and the daemon plan nothing for it from their next run
    (deletions included); an operation under way finishes its current step first.
    """
    from reconciler.cli.clusters import now
    from reconciler.operations.model import Suspension
    from reconciler.operations.store import open_store

    open_store(state_url).suspend(Suspension(runtime, now(), " ".join(reason.split())))
    click.echo(
        f"runtime {runtime}: suspended; nothing is changed in its cluster until "
        f"'reconciler resume {runtime}'"
    )


@click.command(epilog=exits.SUSPEND.describe())
@click.argument("runtime", callback=_runtime_name)
@state_option
def resume(runtime: str, state_url: str) -> None:
    """Lift the suspension of RUNTIME made by `reconciler suspend` (spec.suspend in git stays)."""
    from reconciler.operations.store import open_store

    if open_store(state_url).resume(runtime):
        click.echo(f"runtime {runtime}: resumed; the next sync or daemon run reconciles it")
    else:
        click.echo(f"runtime {runtime}: was not suspended by 'reconciler suspend'")
