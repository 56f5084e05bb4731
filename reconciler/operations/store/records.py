"""Everything but operations in SQL, once for both databases: each runtime's last known state,
the verdicts on commits, the deletion brake's limits, suspensions and the daemon's members.

Verdicts are decided one at a time (:data:`~reconciler.operations.store.base.COMMITS_LOCK`), so
the last ACCEPTED row written, in the table's insertion order, is the commit in force whatever
the replicas' clocks said.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from reconciler.cluster.api import ClusterIdentity
from reconciler.core.brake import Limits
from reconciler.core.head import Head, head_text
from reconciler.core.reasons import parse_reason
from reconciler.core.status import ModuleState, reason_of_state
from reconciler.core.templates import Capabilities
from reconciler.errors import LostOwnershipError
from reconciler.operations.model import (
    CommitRecord,
    CommitVerdict,
    FenceToken,
    Member,
    RuntimeRecord,
    Suspension,
)
from reconciler.operations.store.base import (
    COMMITS_LOCK,
    FENCE_GUARD,
    SqlBase,
    Statements,
    fence_values,
    fenced,
)
from reconciler.operations.store.codec import (
    decode_detail,
    decode_modules,
    deployed_of,
    encode_detail,
    encode_modules,
)
from reconciler.operations.store.contract import LIMITS_SCOPE, may_replace, next_beat

_UPSERT_RUNTIME = (
    "INSERT INTO runtimes (runtime, state, reason, message, commit_id, updated, modules, access) "
    "SELECT :runtime, :state, :reason, :message, :commit_id, :updated, :modules, :access "
    f"WHERE {FENCE_GUARD} "
    "ON CONFLICT (runtime) DO UPDATE SET state = excluded.state, reason = excluded.reason, "
    "message = excluded.message, commit_id = excluded.commit_id, updated = excluded.updated, "
    "modules = excluded.modules, access = CASE WHEN excluded.access <> '' "
    "THEN excluded.access ELSE runtimes.access END"
)


class RecordTables(SqlBase):
    """The runtimes, commits, limits, suspensions, capabilities and members part of
    :class:`~reconciler.operations.store.contract.StateStore`: its roles
    :class:`~reconciler.operations.store.contract.RuntimeRecords`, ``CommitVerdicts``,
    ``BrakeLimits``, ``Suspensions``, ``CapabilityRecords`` and ``MemberLeases``."""

    # -- runtimes --------------------------------------------------------------------------------

    def put_runtime(self, record: RuntimeRecord, fence: FenceToken | None = None) -> None:
        """See :class:`StateStore`."""
        values = {
            **{"runtime": record.runtime, "state": str(record.state)},
            **{"reason": record.reason, "message": record.message},
            **{"commit_id": head_text(record.commit), "updated": self.time(record.updated)},
            **{"modules": encode_modules(record.modules), "access": record.access.describe()},
        }
        with self.transaction() as statements:
            written = statements.run(_UPSERT_RUNTIME, values | fence_values(fence))
            if written.rowcount == 0:
                raise LostOwnershipError(f"runtime {record.runtime} not recorded: {fenced(fence)}")

    def runtimes(self) -> list[RuntimeRecord]:
        """See :class:`StateStore`."""
        return [self._runtime(row) for row in self.query("SELECT * FROM runtimes ORDER BY runtime")]

    def runtime_names(self) -> list[str]:
        """See :class:`StateStore`."""
        return [r["runtime"] for r in self.query("SELECT runtime FROM runtimes ORDER BY runtime")]

    def deployed(self) -> dict[str, dict[str, str]]:
        """See :class:`StateStore`."""
        rows = self.query("SELECT runtime, modules FROM runtimes ORDER BY runtime")
        return {row["runtime"]: deployed_of(row["modules"]) for row in rows}

    def runtime(self, runtime: str) -> RuntimeRecord | None:
        """See :class:`StateStore`."""
        rows = self.query("SELECT * FROM runtimes WHERE runtime = ?", (runtime,))
        return self._runtime(rows[0]) if rows else None

    def forget_runtime(self, runtime: str, fence: FenceToken | None = None) -> None:
        """See :class:`StateStore`."""
        sql = f"DELETE FROM runtimes WHERE runtime = :runtime AND {FENCE_GUARD}"  # noqa: S608 (a constant)
        self._guarded(sql, {"runtime": runtime}, fence)

    def record_access(
        self, runtime: str, access: ClusterIdentity, fence: FenceToken | None = None
    ) -> None:
        """See :class:`StateStore`."""
        sql = f"UPDATE runtimes SET access = :access WHERE runtime = :runtime AND {FENCE_GUARD}"  # noqa: S608 (a constant)
        self._guarded(sql, {"runtime": runtime, "access": access.describe()}, fence)

    def _guarded(self, sql: str, values: dict[str, object], fence: FenceToken | None) -> None:
        """Run ``sql``, a write guarded by :data:`FENCE_GUARD`; when it wrote no row, tell a
        refusal (the fence) from nothing to write (no such runtime), in the same transaction."""
        guard = fence_values(fence)
        with self.transaction() as statements:
            if statements.run(sql, values | guard).rowcount > 0 or fence is None:
                return
            if statements.run(f"SELECT {FENCE_GUARD} AS ok", guard).fetchone()["ok"]:
                return
        raise LostOwnershipError(f"runtime {values['runtime']} not written: {fenced(fence)}")

    def _runtime(self, row: Any) -> RuntimeRecord:
        return RuntimeRecord(
            row["runtime"],
            ModuleState(row["state"]),
            parse_reason(row["reason"], reason_of_state(ModuleState(row["state"]))),
            row["message"],
            Head.parse(row["commit_id"]),
            self.read_stored_time(row["updated"]),
            decode_modules(row["modules"]),
            ClusterIdentity.parse(row["access"]),
        )

    # -- commits ---------------------------------------------------------------------------------

    def decide_commit(self, record: CommitRecord) -> CommitRecord:
        """See :class:`StateStore`."""
        with self.transaction() as statements:
            self.serialise(statements, COMMITS_LOCK)
            standing = self._commit_in(statements, record.commit)
            current = self._last_accepted_in(statements)
            in_force = current.commit if current is not None else None
            if standing is not None and not may_replace(standing, record, in_force):
                return standing
            self._write_commit(statements, record)
            return record

    def accept_commit(self, record: CommitRecord, expected: Head | None) -> CommitRecord | None:
        """See :class:`StateStore`."""
        with self.transaction() as statements:
            self.serialise(statements, COMMITS_LOCK)
            current = self._last_accepted_in(statements)
            standing = self._commit_in(statements, record.commit)
            moved = (current.commit if current else None) == expected
            if not moved or (standing is not None and not may_replace(standing, record)):
                return current
            self._write_commit(statements, record)
            return record

    def commit(self, commit: Head) -> CommitRecord | None:
        """See :class:`StateStore`."""
        rows = self.query("SELECT * FROM commits WHERE commit_id = ?", (commit.text,))
        return self._commit(rows[0]) if rows else None

    def last_accepted(self) -> CommitRecord | None:
        """See :class:`StateStore`."""
        with self.snapshot() as statements:
            return self._last_accepted_in(statements)

    def _commit_in(self, statements: Statements, commit: Head) -> CommitRecord | None:
        sql = "SELECT * FROM commits WHERE commit_id = ?"
        row = statements.run(sql, (commit.text,)).fetchone()
        return self._commit(row) if row is not None else None

    def _last_accepted_in(self, statements: Statements) -> CommitRecord | None:
        row = statements.run(
            "SELECT * FROM commits WHERE verdict = ? ORDER BY {order} DESC LIMIT 1",
            (str(CommitVerdict.ACCEPTED),),
        ).fetchone()
        return self._commit(row) if row is not None else None

    def _write_commit(self, statements: Statements, record: CommitRecord) -> None:
        """The verdict, as the newest row (the last ACCEPTED row written is the one in force)."""
        statements.run("DELETE FROM commits WHERE commit_id = ?", (record.commit.text,))
        statements.run(
            "INSERT INTO commits (commit_id, verdict, decided, message, detail, attempts) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                *(record.commit.text, str(record.verdict), self.time(record.decided)),
                *(record.message, encode_detail(record.detail), record.attempts),
            ),
        )

    def _commit(self, row: Any) -> CommitRecord:
        head = Head.parse(row["commit_id"])
        assert head is not None
        return CommitRecord(
            head,
            CommitVerdict(row["verdict"]),
            self.read_stored_time(row["decided"]),
            row["message"],
            decode_detail(row["detail"]),
            row["attempts"],
        )

    # -- the brake's limits, suspensions ---------------------------------------------------------

    def limits_in_force(self) -> Limits | None:
        """See :class:`StateStore`."""
        rows = self.query("SELECT * FROM brake_limits WHERE scope = ?", (LIMITS_SCOPE,))
        return Limits(int(rows[0]["max_deletions"]), bool(rows[0]["allow"])) if rows else None

    def record_limits(self, limits: Limits, now: datetime) -> None:
        """See :class:`StateStore`."""
        with self.transaction() as statements:
            statements.run(
                "INSERT INTO brake_limits (scope, max_deletions, allow, recorded) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (scope) DO UPDATE SET "
                "max_deletions = excluded.max_deletions, allow = excluded.allow, "
                "recorded = excluded.recorded",
                (LIMITS_SCOPE, limits.max_deletions, limits.allow, self.time(now)),
            )

    def suspend(self, suspension: Suspension) -> None:
        """See :class:`StateStore`."""
        with self.transaction() as statements:
            statements.run(
                "INSERT INTO suspensions (runtime, since, reason) VALUES (?, ?, ?) "
                "ON CONFLICT (runtime) DO UPDATE SET since = excluded.since, "
                "reason = excluded.reason",
                (suspension.runtime, self.time(suspension.since), suspension.reason),
            )

    def resume(self, runtime: str) -> bool:
        """See :class:`StateStore`."""
        with self.transaction() as statements:
            sql = "DELETE FROM suspensions WHERE runtime = ?"
            return statements.run(sql, (runtime,)).rowcount > 0

    def suspensions(self) -> dict[str, Suspension]:
        """See :class:`StateStore`."""
        rows = self.query("SELECT * FROM suspensions ORDER BY runtime")
        return {
            r["runtime"]: Suspension(r["runtime"], self.read_stored_time(r["since"]), r["reason"])
            for r in rows
        }

    # -- the clusters' capabilities -----------------------------------------------------------

    def record_capabilities(self, runtime: str, capabilities: Capabilities) -> None:
        """See :class:`StateStore`."""
        with self.transaction() as statements:
            statements.run(
                "INSERT INTO capabilities (runtime, kube_version, api_versions, recorded) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (runtime) DO UPDATE SET "
                "kube_version = excluded.kube_version, api_versions = excluded.api_versions, "
                "recorded = excluded.recorded",
                (
                    runtime,
                    capabilities.kube_version,
                    json.dumps(list(capabilities.api_versions)),
                    self.time(capabilities.recorded),
                ),
            )

    def capabilities(self) -> dict[str, Capabilities]:
        """See :class:`StateStore`."""
        rows = self.query("SELECT * FROM capabilities ORDER BY runtime")
        return {
            r["runtime"]: Capabilities(
                r["kube_version"],
                tuple(str(v) for v in json.loads(r["api_versions"])),
                self.read_stored_time(r["recorded"]),
            )
            for r in rows
        }

    # -- members ---------------------------------------------------------------------------------

    def heartbeat(self, name: str, now: datetime, lease: timedelta) -> Member:
        """See :class:`StateStore` (the member's row locked: a new member's is written first,
        as no member yet, epoch 0)."""
        with self.transaction() as statements:
            statements.run(
                "INSERT INTO members (name, epoch, heartbeat, started) VALUES (?, 0, ?, ?) "
                "ON CONFLICT (name) DO NOTHING",
                (name, self.time(now), self.time(now)),
            )
            row = statements.run(
                "SELECT * FROM members WHERE name = ? {for_update}", (name,)
            ).fetchone()
            last = self._member(row) if row is not None and int(row["epoch"]) > 0 else None
            member = next_beat(last, name, now, lease)
            statements.run(
                "UPDATE members SET epoch = ?, heartbeat = ?, started = ?, fenced_epoch = ? "
                "WHERE name = ?",
                (
                    *(member.epoch, self.time(member.heartbeat), self.time(member.started)),
                    *(member.fenced_epoch, name),
                ),
            )
        return member

    def fence(self, name: str, epoch: int, lapsed_before: datetime) -> bool:
        """See :class:`StateStore`."""
        with self.transaction() as statements:
            return (
                statements.run(
                    "UPDATE members SET fenced_epoch = epoch WHERE name = ? AND epoch = ? "
                    "AND heartbeat < ? AND fenced_epoch < epoch",
                    (name, epoch, self.time(lapsed_before)),
                ).rowcount
                > 0
            )

    def members(self) -> list[Member]:
        """See :class:`StateStore`."""
        rows = self.query("SELECT * FROM members WHERE epoch > 0 ORDER BY name")
        return [self._member(r) for r in rows]

    def leave(self, name: str) -> None:
        """See :class:`StateStore`."""
        with self.transaction() as statements:
            statements.run("DELETE FROM members WHERE name = ?", (name,))

    def _member(self, row: Any) -> Member:
        heartbeat = self.read_stored_time(row["heartbeat"])
        started = self.read_stored_time(row["started"])
        return Member(row["name"], int(row["epoch"]), heartbeat, started, int(row["fenced_epoch"]))
