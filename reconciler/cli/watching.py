"""The daemon's options of event-driven reconciliation: ``--watch/--no-watch`` and
``--debounce`` (README "Event-driven reconciliation"). Caller: ``reconciler daemon``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from reconciler.cli.options import Duration

F = TypeVar("F", bound=Callable[..., object])


def watch_options(command: F) -> F:
    """The options (parameters ``watch``, None when not given, and ``debounce``, in
    seconds); given here or in the environment, they override ``spec.watch`` and
    ``spec.intervals.debounce`` of the config repo."""
    watch = click.option(
        "--watch/--no-watch",
        default=None,
        show_default="spec.watch, else --watch",
        envvar="RECONCILER_WATCH",
        help="Watch the owned runtimes' clusters and reconcile a runtime as soon as its "
        "operator becomes available, a blocking object goes or someone changes its objects; "
        "--no-watch: no long-lived connections, the retry and resync timers only.",
    )
    debounce = click.option(
        "--debounce",
        type=Duration(),
        default="2s",
        show_default="spec.intervals.debounce, else 2s",
        envvar="RECONCILER_DEBOUNCE",
        help="How long the events of a runtime gather before one reconcile of it.",
    )
    return watch(debounce(command))
