"""The daemon's options of event-driven reconciliation: ``--watch/--no-watch`` and
``--debounce`` (README "Event-driven reconciliation"). Caller: ``reconciler daemon``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from reconciler.cli.options import Duration

F = TypeVar("F", bound=Callable[..., object])


def watch_options(command: F) -> F:
    """The options (parameters ``watch`` and ``debounce``, in seconds)."""
    watch = click.option(
        "--watch/--no-watch",
        default=True,
        show_default=True,
        envvar="RECONCILER_WATCH",
        help="Watch the owned runtimes' clusters and reconcile a runtime as soon as its "
        "operator becomes available, a blocking object goes or someone changes its objects; "
        "--no-watch: no long-lived connections, the retry and resync timers only.",
    )
    debounce = click.option(
        "--debounce",
        type=Duration(),
        default="2s",
        show_default=True,
        envvar="RECONCILER_DEBOUNCE",
        help="How long the events of a runtime gather before one reconcile of it.",
    )
    return watch(debounce(command))
