"""``reconciler rollout list|show|pause|resume|cancel|promote``: the rollouts of changing commits
(``spec.rollout`` of the Settings; the README's "Rolling out a module version").

On the state store (``--state``), or with ``--daemon URL`` through the running daemon's port
(``GET /rollouts``, ``POST /rollout``, the command authenticated as ``POST /sync``): the
daemon then also tells people (its notifications) and reconciles the runtimes a promote
releases at once; on the store, the daemon's rollout job picks the change up at its next look.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from reconciler.cli import exits
from reconciler.cli.options import state_option
from reconciler.cli.output import output_option
from reconciler.core.model import OUTPUT_API_VERSION
from reconciler.core.rollout_steps import RolloutCommand, command_reason

_daemon = click.option(
    "--daemon",
    "daemon_url",
    metavar="URL",
    envvar="RECONCILER_DAEMON",
    help="Ask the running daemon (http://host:8080) instead of the store (RECONCILER_DAEMON).",
)
_secret = click.option(
    "--secret-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="With --daemon: the daemon's webhook secret (for pause, resume, cancel, promote).",
)
_output = output_option("text", "json")


@click.group()
def rollout() -> None:
    """Rollouts: a changing commit reaching the fleet in waves (spec.rollout)."""


@rollout.command("list", epilog=exits.RECORDS.describe())
@state_option
@_daemon
@_output
def list_rollouts(state_url: str, daemon_url: str | None, output_format: str) -> None:
    """The newest rollouts: state, wave under way, progress, why one halted."""
    documents = _fetch(daemon_url, state_url, "")
    if output_format == "json":
        click.echo(_json("RolloutList", {"items": documents}))
        return
    click.echo(f"{'ROLLOUT':<22} {'STATE':<12} {'WAVE':<16} {'PROGRESS':>8}  MESSAGE")
    for doc in documents:
        wave = f"{doc['wave']} ({doc['waveIndex'] + 1}/{len(doc['waves'])})"
        progress = f"{doc['progress']:.0%}"
        click.echo(f"{doc['id']:<22} {doc['state']:<12} {wave:<16} {progress:>8}  {doc['message']}")


@rollout.command(epilog=exits.RECORDS.describe())
@click.argument("rollout_id", metavar="ROLLOUT")
@state_option
@_daemon
@_output
def show(rollout_id: str, state_url: str, daemon_url: str | None, output_format: str) -> None:
    """ROLLOUT's waves and every runtime's wave, state and previous commit."""
    documents = _fetch(daemon_url, state_url, rollout_id)
    doc = documents[0]
    if output_format == "json":
        click.echo(_json("Rollout", doc))
        return
    click.echo(f"rollout {doc['id']} of commit {doc['commit'][:12]}: {doc['state']}")
    if doc["message"]:
        click.echo(f"  {doc['reason']}: {doc['message']}")
    hours = doc["healthyFor"] / 3600
    click.echo(f"  healthy for {hours:g}h per wave; halts at {doc['haltAfterErrors']} in Error")
    for index, wave in enumerate(doc["waves"]):
        mark = ">" if index == doc["waveIndex"] else " "
        click.echo(
            f"{mark} wave {index + 1} {wave['name']} ({wave['chosenBy']}): {wave['runtimes']} "
            f"runtime(s), {wave['ready']} Ready, {wave['error']} Error, {wave['skipped']} skipped"
        )
    click.echo(f"{'RUNTIME':<24} {'WAVE':<12} {'STATE':<12} NOTE")
    for member in doc["members"]:
        click.echo(
            f"{member['runtime']:<24} {member['wave']:<12} {member['state']:<12} {member['note']}"
        )


def _command(command: RolloutCommand, help_text: str) -> click.Command:
    @click.argument("rollout_id", metavar="ROLLOUT")
    @state_option
    @_daemon
    @_secret
    def run(
        rollout_id: str,
        state_url: str,
        daemon_url: str | None,
        secret_file: Path | None,
        reason: str = "",
    ) -> None:
        saved = _apply(command, rollout_id, state_url, daemon_url, secret_file, reason)
        wave = saved["wave"]
        click.echo(f"rollout {saved['id']}: {saved['state']}, wave {wave}")

    if command.keeps_reason:
        run = click.option("--reason", default="", help="Why, kept with the rollout.")(run)
    return click.command(str(command), help=help_text, epilog=exits.RECORDS.describe())(run)


def _apply(
    command: RolloutCommand,
    rollout_id: str,
    state_url: str,
    daemon_url: str | None,
    secret_file: Path | None,
    reason: str,
) -> dict[str, Any]:
    reason = command_reason(reason)
    if daemon_url is not None:
        from reconciler.cli.daemon_client import post

        query = {"id": rollout_id, "command": str(command), "reason": reason}
        answer = post(daemon_url, "/rollout", secret_file, query)
        return answer.document
    from reconciler.cli.clusters import now
    from reconciler.operations.rollouts import command_rollout, rollout_document
    from reconciler.operations.store import open_store

    saved, _ = command_rollout(open_store(state_url), rollout_id, command, now(), reason)
    return rollout_document(saved)


def _fetch(daemon_url: str | None, state_url: str, rollout_id: str) -> list[dict[str, Any]]:
    if daemon_url is not None:
        from reconciler.cli.daemon_client import get_json

        query = f"?id={rollout_id}" if rollout_id else ""
        found: list[dict[str, Any]] = get_json(daemon_url, "/rollouts" + query)["items"]
        return found
    from reconciler.operations.rollouts import find_rollout, rollout_document
    from reconciler.operations.store import open_store

    store = open_store(state_url)
    if rollout_id:
        return [rollout_document(find_rollout(store, rollout_id), members=True)]
    return [rollout_document(r) for r in store.rollout_summaries(limit=20)]


def _json(kind: str, body: dict[str, Any]) -> str:
    return json.dumps({"apiVersion": OUTPUT_API_VERSION, "kind": kind, **body}, indent=2)


_HELP = {
    RolloutCommand.PAUSE: "Start no further wave of ROLLOUT until `reconciler rollout resume`.",
    RolloutCommand.RESUME: (
        "Go on with a paused ROLLOUT (a halted one does not resume: push a fix)."
    ),
    RolloutCommand.CANCEL: "End ROLLOUT: upgraded runtimes stay, the others keep their commit.",
    RolloutCommand.PROMOTE: "Start ROLLOUT's next wave now, without waiting for the healthy time.",
}
for _command_name in RolloutCommand:
    rollout.add_command(_command(_command_name, _HELP[_command_name]))
