"""``reconciler suspend RUNTIME`` and ``reconciler resume RUNTIME``: stop changing a runtime's
cluster in an emergency, and go on again (as ``flux suspend``/``flux resume``).

The suspension is recorded in the state store, so ``sync`` and every daemon sharing that store
honour it from their next run of the runtime: its operations plan nothing and change nothing
(deletions included), and ``status`` shows it. ``spec.suspend: true`` in git suspends too and
wins: ``resume`` lifts only the suspension made here. The runtime must be known: in the state
store or in the config repo ``[REPO]`` (default: the current directory, when it is one); a
typo is refused with the closest name. With ``--daemon URL`` the running daemon records it
(``POST /suspend``, ``POST /resume``, authenticated as ``POST /sync``), for a store the command
line cannot reach.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from reconciler.cli import exits
from reconciler.cli.options import complete_runtime, state_option
from reconciler.core.model import is_runtime_name
from reconciler.core.redaction import mask_url_password

if TYPE_CHECKING:
    from reconciler.operations.store import StateStore


def _runtime_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not is_runtime_name(value):
        raise click.BadParameter(f"{value[:70]!r} is not a runtime name (a DNS-1123 label)")
    return value


_repo = click.argument(
    "repo",
    default=".",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="[REPO]",
)
_daemon = click.option(
    "--daemon",
    "daemon_url",
    metavar="URL",
    envvar="RECONCILER_DAEMON",
    help="Ask the running daemon (http://host:8080) to record it (RECONCILER_DAEMON).",
)
_secret = click.option(
    "--secret-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="With --daemon: the daemon's webhook secret.",
)


def _suspended_text(runtime: str) -> str:
    return (
        f"runtime {runtime}: suspended; nothing is changed in its cluster until "
        f"'reconciler resume {runtime}'"
    )


def _resumed_text(runtime: str, was: bool) -> str:
    if was:
        return f"runtime {runtime}: resumed; the next sync or daemon run reconciles it"
    return f"runtime {runtime}: was not suspended by 'reconciler suspend'"


@click.command(epilog=exits.SUSPEND.describe())
@click.argument("runtime", callback=_runtime_name, shell_complete=complete_runtime)
@_repo
@click.option("--reason", default="", help="Why, shown by status (say who and what for).")
@state_option
@_daemon
@_secret
def suspend(
    runtime: str,
    repo: Path,
    reason: str,
    state_url: str,
    daemon_url: str | None,
    secret_file: Path | None,
) -> None:
    """Stop changing RUNTIME's cluster until `reconciler resume RUNTIME`.

    Recorded in the state store (or by the daemon with --daemon): sync and the daemon plan
    nothing for it from their next run (deletions included); an operation under way finishes
    its current step first. RUNTIME must be in the store or in REPO.
    """
    reason = " ".join(reason.split())
    if daemon_url is not None:
        from reconciler.cli.daemon_client import post

        post(daemon_url, "/suspend", secret_file, {"runtime": runtime, "reason": reason})
        click.echo(_suspended_text(runtime))
        return
    from reconciler.cli.clusters import now
    from reconciler.operations.model import Suspension

    store = _known_store(runtime, repo, state_url)
    store.suspend(Suspension(runtime, now(), reason))
    click.echo(_suspended_text(runtime))


@click.command(epilog=exits.SUSPEND.describe())
@click.argument("runtime", callback=_runtime_name, shell_complete=complete_runtime)
@_repo
@state_option
@_daemon
@_secret
def resume(
    runtime: str, repo: Path, state_url: str, daemon_url: str | None, secret_file: Path | None
) -> None:
    """Lift the suspension of RUNTIME made by `reconciler suspend` (spec.suspend in git stays)."""
    if daemon_url is not None:
        from reconciler.cli.daemon_client import post

        answer = post(daemon_url, "/resume", secret_file, {"runtime": runtime})
        click.echo(_resumed_text(runtime, bool(answer.document.get("resumed", True))))
        return
    store = _known_store(runtime, repo, state_url)
    click.echo(_resumed_text(runtime, store.resume(runtime)))


def _known_store(runtime: str, repo: Path, state_url: str) -> StateStore:
    """The store, once ``runtime`` is known to it or to the repo (else exit 2, did you mean)."""
    from reconciler.cli.names import check_runtime, repo_runtime_names
    from reconciler.operations.store import open_existing_store, open_store

    existing = open_existing_store(state_url)
    known = repo_runtime_names(repo)
    if existing is not None:
        known |= set(existing.runtime_names()) | set(existing.suspensions())
    where = f"the state store {mask_url_password(state_url)}"
    if (repo / "runtimes").is_dir():
        where += f" nor in the config repo {repo}"
    check_runtime(runtime, known, where)
    return existing if existing is not None else open_store(state_url)
