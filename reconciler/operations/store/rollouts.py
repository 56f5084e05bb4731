"""Rollouts in SQL, once for both databases, and their JSON at the store's edge.

One row per rollout (one per commit that changes what runtimes run): its id, commit, state,
times, a version that counts its saves, and the waves and members (each runtime's wave, state
and base commit) as JSON. A save writes over the version it read (compare-and-set): of two
replicas moving one rollout, or a replica and a ``reconciler rollout`` command, one wins and
the other reads it again. A daemon replica's save also carries its
:class:`~reconciler.operations.model.FenceToken`, checked in the statement that writes
(:data:`~reconciler.operations.store.base.FENCE_GUARD`): a replica whose lease lapsed and was
fenced writes nothing, even when its compare-and-set would match
(:class:`~reconciler.errors.LostOwnershipError`). The newest rollout, in insertion order, is
the one that gates.

The JSON also keeps the rollout's summary (``summary``: each wave's name, size and members by
state, and the other fields a list shows;
:class:`~reconciler.core.rollout_summary.RolloutSummary`), written with the members at each
save: a list of rollouts (:meth:`RolloutTables.rollout_summaries`) reads only that part,
picked out of the JSON by the database (``->>``: SQLite 3.38 or later, PostgreSQL), and
decodes no member. The other keys stay as they were, for readers of an older version; a row
saved before summaries were kept is read whole and summarized.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from reconciler.core.rollout_summary import RolloutSummary, WaveSummary, summarize, wave_states
from reconciler.core.rollouts import HaltReason, Member, MemberState, Rollout, RolloutState, Wave
from reconciler.errors import LostOwnershipError
from reconciler.operations.model import FenceToken
from reconciler.operations.store.base import FENCE_GUARD, SqlBase, fence_values, fenced

_INSERT = (
    "INSERT INTO rollouts (id, commit_id, state, created, updated, version, data) "
    "SELECT :id, :commit_id, :state, :created, :updated, :version, :data "
    f"WHERE {FENCE_GUARD} ON CONFLICT (id) DO NOTHING"
)
#: The columns of a rollout and the summary in its JSON (``{data_json}``: the dialect's JSON
#: of the ``data`` column).
_SUMMARIES = (
    "SELECT id, commit_id, state, created, updated, version, "
    "{data_json} ->> 'summary' AS summary FROM rollouts ORDER BY {order} DESC LIMIT ?"
)
_UPDATE = (
    "UPDATE rollouts SET state = :state, updated = :updated, version = :version, data = :data "  # noqa: S608 (a constant)
    f"WHERE id = :id AND version = :read AND {FENCE_GUARD}"
)


class RolloutTables(SqlBase):
    """:class:`~reconciler.operations.store.contract.RolloutRecords`, the rollouts part of
    :class:`~reconciler.operations.store.contract.StateStore`."""

    def put_rollout(self, rollout: Rollout, fence: FenceToken | None = None) -> Rollout | None:
        """See :class:`StateStore`: a write that wrote nothing is told apart, in the same
        transaction, as the fence's refusal (raised) or another writer's version (``None``)."""
        saved = replace(rollout, version=rollout.version + 1)
        values = {
            "id": rollout.id,
            "commit_id": rollout.commit,
            "state": str(rollout.state),
            "created": self.time(rollout.created),
            "updated": self.time(rollout.updated or rollout.created),
            "version": saved.version,
            "data": encode_rollout(rollout),
            "read": rollout.version,
        }
        guard = fence_values(fence)
        with self.transaction() as statements:
            if rollout.version == 0:
                insert = {k: v for k, v in values.items() if k != "read"}
                written = statements.run(_INSERT, insert | guard)
            else:
                update = {k: v for k, v in values.items() if k not in ("commit_id", "created")}
                written = statements.run(_UPDATE, update | guard)
            if written.rowcount == 1:
                return saved
            if (
                fence is None
                or statements.run(f"SELECT {FENCE_GUARD} AS ok", guard).fetchone()["ok"]
            ):
                return None
        raise LostOwnershipError(f"rollout {rollout.id} not saved: {fenced(fence)}")

    def rollouts(self, limit: int = 50) -> list[Rollout]:
        """See :class:`StateStore`."""
        rows = self.query("SELECT * FROM rollouts ORDER BY {order} DESC LIMIT ?", (limit,))
        return [self._rollout(row) for row in rows]

    def rollout_summaries(self, limit: int = 50) -> list[RolloutSummary]:
        """See :class:`StateStore`."""
        found: list[RolloutSummary] = []
        for row in self.query(_SUMMARIES, (limit,)):
            if row["summary"] is None:  # saved before summaries were kept
                whole = self.query("SELECT * FROM rollouts WHERE id = ?", (row["id"],))
                found.extend(summarize(self._rollout(r)) for r in whole)
            else:
                found.append(self._summary(row))
        return found

    def rollout(self, rollout_id: str) -> Rollout | None:
        """See :class:`StateStore`."""
        rows = self.query(  # a prefix compared as text: % and _ are no wildcards here
            "SELECT * FROM rollouts WHERE substr(id, 1, CAST(? AS INTEGER)) = ? "
            "ORDER BY {order} DESC LIMIT 2",
            (len(rollout_id), rollout_id.lower()),
        )
        return self._rollout(rows[0]) if len(rows) == 1 else None

    def latest_rollout(self) -> Rollout | None:
        """See :class:`StateStore`."""
        rows = self.query("SELECT * FROM rollouts ORDER BY {order} DESC LIMIT 1")
        return self._rollout(rows[0]) if rows else None

    def _rollout(self, row: Any) -> Rollout:
        return decode_rollout(row["data"], self._columns(row))

    def _summary(self, row: Any) -> RolloutSummary:
        return decode_summary(row["summary"], self._columns(row))

    def _columns(self, row: Any) -> dict[str, Any]:
        """The fields a rollout (and its summary) keeps in columns of its own."""
        return {
            "id": row["id"],
            "commit": row["commit_id"],
            "state": RolloutState(row["state"]),
            "created": self.read_stored_time(row["created"]),
            "updated": self.read_time(row["updated"]),
            "version": int(row["version"]),
        }


def encode_rollout(rollout: Rollout) -> str:
    """The JSON of what a rollout's columns do not hold, and its summary."""
    return json.dumps(
        {
            "summary": _encode_summary(summarize(rollout)),
            "waves": [[w.name, w.chosen_by, list(w.runtimes)] for w in rollout.waves],
            "members": [[m.runtime, m.wave, str(m.state), m.base, m.note] for m in rollout.members],
            **_progress_json(rollout),
        },
        separators=(",", ":"),
    )


def decode_rollout(text: str, columns: dict[str, Any]) -> Rollout:
    """A rollout from its row: the columns and the JSON of :func:`encode_rollout`."""
    data = json.loads(text)
    return Rollout(
        waves=tuple(Wave(name, by, tuple(names)) for name, by, names in data["waves"]),
        members=tuple(
            Member(name, wave, MemberState(s), base, note)
            for name, wave, s, base, note in data["members"]
        ),
        **_progress(data),
        **columns,
    )


def _encode_summary(summary: RolloutSummary) -> dict[str, Any]:
    """The summary's JSON (each wave's states with members only)."""
    return {
        "waves": [
            [w.name, w.chosen_by, w.runtimes, {k: n for k, n in w.states.items() if n}]
            for w in summary.waves
        ],
        **_progress_json(summary),
    }


def decode_summary(text: str, columns: dict[str, Any]) -> RolloutSummary:
    """A rollout's summary from its row: the columns and the summary's JSON."""
    data = json.loads(text)
    return RolloutSummary(
        waves=tuple(
            WaveSummary(name, by, int(size), wave_states(states))
            for name, by, size, states in data["waves"]
        ),
        **_progress(data),
        **columns,
    )


def _progress_json(rollout: Rollout | RolloutSummary) -> dict[str, Any]:
    """The JSON of the progress fields a rollout and its summary share."""
    return {
        "healthyFor": rollout.healthy_for.total_seconds(),
        "maxErrors": rollout.max_errors,
        "wave": rollout.wave,
        "waveStarted": _time(rollout.wave_started),
        "healthySince": _time(rollout.healthy_since),
        "reason": str(rollout.reason or ""),
        "message": rollout.message,
    }


def _progress(data: dict[str, Any]) -> dict[str, Any]:
    """The progress fields back from :func:`_progress_json`'s JSON."""
    return {
        "healthy_for": timedelta(seconds=data["healthyFor"]),
        "max_errors": int(data["maxErrors"]),
        "wave": int(data["wave"]),
        "wave_started": _read(data["waveStarted"]),
        "healthy_since": _read(data["healthySince"]),
        "reason": HaltReason(data["reason"]) if data["reason"] else None,
        "message": data["message"],
    }


def _time(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _read(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text is not None else None
