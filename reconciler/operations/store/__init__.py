"""The state store: operations, their stages and steps, each runtime's last known state, the
verdicts on commits, the brake's limits, suspensions, the daemon's members, rollouts and the
notifications outbox.

The rooms of the package:

- :mod:`.contract`: the role protocols (:class:`OperationLedger`, :class:`RuntimeRecords`,
  :class:`CommitVerdicts`, ...), each caller taking the one it uses, :class:`StateStore`
  composed of them all, and the rules every store applies alike;
- :mod:`.opening`: :func:`open_store` and its kin, which store a ``--state`` URL names;
- :mod:`.codec`: the JSON of typed values (operation data, module statuses, errors, verdict
  details), at the store's edge only;
- :mod:`.rows`: the row-diff cache (a save writes only the rows that changed);
- :mod:`.schema`: the schema versions, one declarative list of migrations;
- :mod:`.base`, :mod:`.operations`, :mod:`.records`, :mod:`.rollouts`, :mod:`.outbox`: the one
  SQL implementation, written once for both databases (:mod:`.outbox`: the notifications
  waiting to be sent);
- :mod:`.sqlite`, :mod:`.postgres`: the two dialects (connection, transactions, placeholders,
  locks, and PostgreSQL's one-statement save); the only importers of sqlite3 and psycopg.

Nothing secret is stored (S4). Callers: the engine, the runner, the CLI, the daemon.
"""

from reconciler.operations.store.contract import (
    ALLOWED_DELETIONS,
    LIMITS_SCOPE,
    BrakeLimits,
    CapabilityRecords,
    CommitVerdicts,
    MemberLeases,
    NotificationOutbox,
    OperationLedger,
    Prunable,
    RolloutRecords,
    RunLedger,
    RuntimeRecords,
    StateStore,
    StatusReader,
    Suspensions,
    SyncLedger,
    load_status,
    load_statuses,
    may_replace,
    next_beat,
)
from reconciler.operations.store.opening import (
    check_store,
    open_existing_store,
    open_store,
    open_store_to_read,
)
from reconciler.operations.store.rows import OperationRows, RowChanges, SavedRows
from reconciler.operations.store.schema import MIGRATIONS, SCHEMA_VERSION, TABLES
from reconciler.operations.store.sqlite import SqliteStore

__all__ = [
    "ALLOWED_DELETIONS",
    "LIMITS_SCOPE",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "TABLES",
    "BrakeLimits",
    "CapabilityRecords",
    "CommitVerdicts",
    "MemberLeases",
    "NotificationOutbox",
    "OperationLedger",
    "OperationRows",
    "Prunable",
    "RolloutRecords",
    "RowChanges",
    "RunLedger",
    "RuntimeRecords",
    "SavedRows",
    "SqliteStore",
    "StateStore",
    "StatusReader",
    "Suspensions",
    "SyncLedger",
    "check_store",
    "load_status",
    "load_statuses",
    "may_replace",
    "next_beat",
    "open_existing_store",
    "open_store",
    "open_store_to_read",
]
