"""The rollout endpoints of the daemon's HTTP port: ``GET /rollouts`` (the newest rollouts'
summaries; ``?id=`` for one, with its runtimes) and ``POST /rollout?id=&command=&reason=``
(authenticated by :mod:`reconciler.daemon.http`, which routes here). Each answers a status
and a JSON document, secrets masked (S4); a reason given with a command is masked before it
is kept.

Caller: :class:`reconciler.daemon.http.Endpoints`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.core.redaction import mask_all
from reconciler.core.rollout_steps import RolloutCommand, RolloutCommandError, command_reason
from reconciler.daemon.service import Daemon
from reconciler.errors import NotFoundError
from reconciler.operations.rollouts import find_rollout, rollout_document

Answer = tuple[int, dict[str, Any]]


def rollouts_answer(daemon: Daemon, query: Mapping[str, str]) -> Answer:
    """The newest rollouts, or the one ``?id=`` names with its runtimes."""
    wanted = query.get("id", "")
    if not wanted:
        newest = daemon.store.rollout_summaries(limit=20)  # no member decoded
        return 200, mask_all({"items": [rollout_document(r) for r in newest]})
    try:
        found = find_rollout(daemon.store, wanted)
    except NotFoundError as error:
        return 404, {"error": str(error)}
    return 200, mask_all({"items": [rollout_document(found, members=True)]})


def rollout_command(daemon: Daemon, query: Mapping[str, str]) -> Answer:
    """Pause, resume, cancel or promote the rollout ``?id=`` names."""
    try:
        command = RolloutCommand(query.get("command", ""))
    except ValueError:
        known = ", ".join(c.value for c in RolloutCommand)
        return 400, {"error": f"?command= needs one of {known}"}
    reason = command_reason(query.get("reason", ""))  # kept and shown: no secret
    try:
        saved = daemon.rollouts.command(query.get("id", ""), command, reason)
    except NotFoundError as error:
        return 404, {"error": str(error)}
    except RolloutCommandError as error:
        return 409, {"error": str(error)}
    return 200, mask_all(rollout_document(saved))
