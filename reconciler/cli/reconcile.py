"""``reconciler reconcile RUNTIME``: reconcile one runtime now, and with ``--wait`` until its
operation has finished (as ``flux reconcile --with-source`` and ``argocd app sync --wait``).

With ``--daemon URL`` (or ``RECONCILER_DAEMON``) the running daemon is asked (``POST
/sync?runtime=NAME``: it polls git first, then reconciles the runtime on its workers), and
``--wait`` follows the runtime in the daemon's ``/status``. Without, the runtime's operation runs
here, as ``reconciler sync --runtime RUNTIME`` would run it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from reconciler.cli import exits
from reconciler.cli.options import (
    ClusterOptions,
    Duration,
    RepoInput,
    RunRequest,
    allow_option,
    channels_option,
    cluster_options,
    complete_runtime,
    debugging,
    max_size_option,
    repo_argument,
    state_option,
)
from reconciler.cli.output import output_option
from reconciler.cli.progress import announce_repo

#: Waits between two looks at the daemon's ``/status`` (tests replace it).
pause: Callable[[float], None] = time.sleep


@click.command(epilog=exits.RECONCILE.describe())
@click.argument("runtime", shell_complete=complete_runtime)
@repo_argument
@click.option(
    "--wait",
    is_flag=True,
    help="Wait until the runtime's operation has finished (up to --timeout); exit 1 when it "
    "failed, left a module in Error, or was still under way.",
)
@click.option(
    "--timeout",
    type=Duration(),
    default="5m",
    show_default=True,
    help="With --wait: how long to wait.",
)
@click.option(
    "--daemon",
    "daemon_url",
    metavar="URL",
    envvar="RECONCILER_DAEMON",
    help="Ask the running daemon (http://host:8080) instead of running here (RECONCILER_DAEMON).",
)
@click.option(
    "--secret-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="With --daemon: the daemon's webhook secret.",
)
@cluster_options(create=True)
@state_option
@allow_option
@channels_option
@max_size_option
@output_option("text", "json", "yaml")
@click.pass_context
def reconcile(
    ctx: click.Context,
    runtime: str,
    repo: Path,
    wait: bool,
    timeout: float,
    daemon_url: str | None,
    secret_file: Path | None,
    clusters: ClusterOptions,
    state_url: str,
    allow_deletions: Sequence[str],
    channels_dir: Path | None,
    max_file_size: int,
    output_format: str,
) -> None:
    """Reconcile RUNTIME now: through the running daemon with --daemon (it polls git first),
    else here, as sync --runtime RUNTIME. With --wait, until its operation has finished."""
    if daemon_url is not None:
        sys.exit(through_daemon(daemon_url, secret_file, runtime, timeout if wait else None))
    announce_repo(repo, sys.stderr)
    from reconciler.cli.clusters import state_url_for
    from reconciler.cli.sync import SyncOptions, run_sync

    source = RepoInput(repo, channels_dir, max_file_size)
    store_url = state_url_for(ctx, state_url, clusters.snapshot)
    run = RunRequest(source, clusters, store_url, (runtime,), allow_deletions)
    waited = timeout if wait else 0.0
    options = SyncOptions(waited, False, output_format, debugging(ctx), 1, must_finish=wait)
    sys.exit(run_sync(run, options))


def through_daemon(url: str, secret_file: Path | None, runtime: str, timeout: float | None) -> int:
    """Ask the daemon to reconcile ``runtime``; with a ``timeout``, follow its ``/status``
    until the operation asked for ends (the exit status: 1 when it failed) or shows an error
    it retries on (an unreachable API server: 1 too, the daemon goes on retrying)."""
    from reconciler.cli.daemon_client import request_sync, runtime_status

    asked = request_sync(url, secret_file, runtime) or datetime.now(UTC)
    if timeout is None:
        return exits.OK
    deadline = time.monotonic() + timeout
    while True:
        found = runtime_status(url, runtime)
        if found is not None and _ended_since(found, asked):
            click.echo(f"runtime {runtime}: {found['state']} {found['reason']}: {found['message']}")
            if found["state"] != "Error":
                return exits.OK
            if found.get("operation") is not None:
                click.echo(f"runtime {runtime}: the daemon retries it", err=True)
            return exits.SYNC_FAILED
        left = deadline - time.monotonic()
        if left <= 0:
            shown = f"{found['state']} {found['reason']}" if found is not None else "not seen yet"
            click.echo(
                f"runtime {runtime}: not finished after {timeout:g}s ({shown}); the daemon "
                "goes on with it",
                err=True,
            )
            return exits.SYNC_FAILED
        pause(min(1.0, left))


def _ended_since(found: dict[str, Any], asked: datetime) -> bool:
    """Whether the daemon's entry shows, since ``asked`` (the daemon's clock), an operation
    that ended, or one that retries on an error (state Error)."""
    try:
        updated = datetime.fromisoformat(str(found.get("updated")))
    except ValueError:
        return False
    if updated < asked:
        return False
    return found.get("operation") is None or found.get("state") == "Error"
