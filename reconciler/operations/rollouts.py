"""Rollouts on the state store: the commands people give (pause, resume, cancel, promote), each
written over the version read and tried again when another writer came first, and a rollout's
document (``rollout show -o json``, ``/status``, the daemon's ``/rollouts``), of a rollout or of
its summary (lists: no member decoded).

A command is a person's write: it carries no member's lease token (the daemon's own rollout
writes do, :mod:`reconciler.daemon.rollouts`). It is no member's work, with a lease that may
lapse mid-way: it reads the rollout and writes it back at once over the version read, so it
never acts on a stale view, whichever replica relays it.

Callers: ``reconciler rollout`` on a store, the daemon's rollout job and HTTP port.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, overload

from reconciler.core.rollout_steps import Moment, RolloutCommand, run_command
from reconciler.core.rollout_summary import RolloutSummary, summarize
from reconciler.core.rollouts import MemberState, Rollout
from reconciler.errors import NotFoundError, TransientError
from reconciler.operations.store import RolloutRecords

#: Tries of a command against writers that keep coming first.
_TRIES = 5


def find_rollout(store: RolloutRecords, rollout_id: str) -> Rollout:
    """The rollout ``rollout_id`` names (a unique prefix); :class:`NotFoundError` without."""
    found = store.rollout(rollout_id) if rollout_id else None
    if found is None:
        known = ", ".join(r.id for r in store.rollout_summaries(limit=5)) or "none yet"
        raise NotFoundError(
            f"no rollout '{rollout_id}' (or the prefix names several); the newest: {known}"
        )
    return found


def command_rollout(
    store: RolloutRecords, rollout_id: str, command: RolloutCommand, now: datetime, why: str = ""
) -> tuple[Rollout, list[Moment]]:
    """Apply ``command`` to the rollout and save it; the rollout saved and its moments.
    :class:`~reconciler.core.rollout_steps.RolloutCommandError` when it does not apply. A
    secret pasted into ``why`` is masked before it is kept (S4)."""
    for _ in range(_TRIES):
        current = find_rollout(store, rollout_id)
        changed, moments = run_command(current, command, now, why)
        saved = store.put_rollout(changed)
        if saved is not None:
            return saved, moments
    raise TransientError(f"rollout {rollout_id} kept changing under the {command}; try again", 1)


@overload
def rollout_document(rollout: Rollout, *, members: bool = False) -> dict[str, Any]: ...


@overload
def rollout_document(rollout: RolloutSummary) -> dict[str, Any]: ...


def rollout_document(rollout: Rollout | RolloutSummary, *, members: bool = False) -> dict[str, Any]:
    """A rollout as JSON: its waves with their progress, its state and halt reason (the same
    of a rollout and of its summary); with ``members`` (a :class:`Rollout` only), every
    runtime's wave, state and base."""
    summary = summarize(rollout) if isinstance(rollout, Rollout) else rollout
    document = _summary_document(summary)
    if members:
        if not isinstance(rollout, Rollout):
            raise TypeError("a rollout's members need the rollout, not its summary")
        document["members"] = [
            {
                "runtime": m.runtime,
                "wave": rollout.waves[m.wave].name,
                "state": str(m.state),
                "base": m.base,
                "note": m.note,
            }
            for m in rollout.members
        ]
    return document


def _summary_document(rollout: RolloutSummary) -> dict[str, Any]:
    waves = [
        {
            "name": wave.name,
            "chosenBy": wave.chosen_by,
            "runtimes": wave.runtimes,
            "ready": wave.states[MemberState.READY.value],
            "error": wave.states[MemberState.ERROR.value],
            "skipped": wave.states[MemberState.SKIPPED.value],
            "started": (index <= rollout.wave and rollout.state != "Superseded")
            or wave.released > 0,
        }
        for index, wave in enumerate(rollout.waves)
    ]
    return {
        "id": rollout.id,
        "commit": rollout.commit,
        "state": str(rollout.state),
        "wave": rollout.waves[rollout.wave].name,
        "waveIndex": rollout.wave,
        "progress": round(rollout.progress, 4),
        "counts": rollout.counts(),
        "waves": waves,
        "healthyFor": int(rollout.healthy_for.total_seconds()),
        "haltAfterErrors": rollout.max_errors,
        "reason": str(rollout.reason or ""),
        "message": rollout.message,
        "created": rollout.created.isoformat(),
        "updated": rollout.updated.isoformat() if rollout.updated else None,
        "waveStarted": rollout.wave_started.isoformat() if rollout.wave_started else None,
        "healthySince": rollout.healthy_since.isoformat() if rollout.healthy_since else None,
    }
