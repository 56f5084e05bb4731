"""Which store a ``--state`` URL names, opened: a SQLite file or a PostgreSQL database (psycopg
is imported only when one is named). The default URL is the command line's
(:func:`reconciler.cli.options.default_state_url`)."""

from __future__ import annotations

import os
from pathlib import Path

from reconciler.core.redaction import mask_url_password
from reconciler.errors import SourceError
from reconciler.operations.store.contract import StateStore
from reconciler.operations.store.sqlite import SqliteStore

_SQLITE = "sqlite:///"


def open_store(url: str) -> StateStore:
    """The store a ``--state`` URL names: ``sqlite:///path/to/state.db``, or
    ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE`` (also ``postgres://``)."""
    if url.startswith(("postgresql://", "postgres://")):
        from reconciler.operations.store.postgres import PostgresStore  # psycopg only if used

        return PostgresStore(url)
    if not url.startswith(_SQLITE):
        raise SourceError(
            f"--state {mask_url_password(url)}: use sqlite:///PATH or "
            "postgresql://USER@HOST[:PORT]/DATABASE"
        )
    return SqliteStore(Path(os.path.expanduser(url[len(_SQLITE) :])))


def open_existing_store(url: str) -> StateStore | None:
    """:func:`open_store` for commands that only read: ``None`` for a SQLite file that does not
    exist (nothing was recorded there), instead of creating it."""
    if url.startswith(_SQLITE) and not Path(os.path.expanduser(url[len(_SQLITE) :])).exists():
        return None
    return open_store(url)


def open_store_to_read(url: str) -> StateStore:
    """:func:`open_store` for plans that change nothing (``diff``, ``sync --dry-run``): where
    the SQLite file does not exist, an empty store in memory, so that a read creates no file
    (nor its folder) and plans as a new store would."""
    found = open_existing_store(url)
    return found if found is not None else SqliteStore(Path(":memory:"))


def check_store(store: StateStore) -> None:
    """Read the whole store once where its file can be damaged (SQLite's ``quick_check``), so
    that a daemon refuses a damaged store at its start; a PostgreSQL server checks its own pages.
    """
    if isinstance(store, SqliteStore):
        store.check()
