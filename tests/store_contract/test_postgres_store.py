"""What only the PostgreSQL store has: a URL (whose password is never shown), password sources,
a server that goes away.

The URL checks run always (they need no server: port 1 on 127.0.0.1 refuses at once); the rest
run when RECONCILER_TEST_POSTGRES names a server (see conftest.py).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from psycopg.conninfo import conninfo_to_dict

from reconciler.cli import cli
from reconciler.core.head import Head
from reconciler.core.reasons import Reason
from reconciler.core.redaction import mask_url_password, url_passwords
from reconciler.core.status import ModuleState
from reconciler.errors import StoreError, TransientError
from reconciler.operations.model import RuntimeRecord
from reconciler.operations.store import open_store, schema
from reconciler.operations.store.postgres import PostgresStore
from tests.support.store_backends import PostgresBackend, with_schema

SECRET = "s3cr%40t-Pw"  # percent-encoded "s3cr@t-Pw"
RECORD = RuntimeRecord(
    "rt", ModuleState.READY, Reason.READY, "ok", Head("c1"), datetime(2026, 1, 2, tzinfo=UTC)
)


def _status(url: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(cli, ["status", "--state", url])
    lines = result.output.strip().splitlines()
    # a password on the command line is warned about first
    # (tests/daemon/test_daemon_command_line.py)
    return result.exit_code, [line for line in lines if not line.startswith("warning: ")]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:pw@db.example:5432/state", "postgresql://app:***@db.example:5432/state"),
        ("postgres://app@db/state", "postgres://app@db/state"),
        ("postgresql://db:5432/state", "postgresql://db:5432/state"),
        ("postgresql://app:p@ss/w@db/state", "postgresql://app:***@db/state"),
        (
            "postgresql:///state?host=/run/pg&password=pw",
            "postgresql:///state?host=/run/pg&password=***",
        ),
        ("sqlite:///var/lib/state.db", "sqlite:///var/lib/state.db"),
    ],
)
def test_a_url_is_shown_with_its_password_masked(url: str, shown: str) -> None:
    assert mask_url_password(url) == shown
    for password in url_passwords(url):
        assert password not in shown


def test_an_unreachable_server_is_one_line_naming_what_to_fix() -> None:
    code, lines = _status("postgresql://nobody@127.0.0.1:1/x")

    assert code == 2
    (line,) = lines
    assert line.startswith("error: cannot use the state store postgresql://nobody@127.0.0.1:1/x: ")
    assert "Connection refused" in line
    assert "check the host, port, database, user and password" in line
    assert "PGPASSFILE" in line


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://nobody:{SECRET}@127.0.0.1:1/x",
        f"postgresql://nobody:{SECRET}@[127.0.0.1/x",  # malformed: libpq quotes the whole URL
        f"postgres://nobody:{SECRET}@127.0.0.1:port/x",
        f"postgresql://nobody@127.0.0.1:1/x?password={SECRET}",
        f"mysql://nobody:{SECRET}@127.0.0.1/x",
    ],
)
def test_a_bad_url_is_one_line_without_its_password(url: str) -> None:
    code, lines = _status(url)

    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    assert "***" in lines[0]
    assert "s3cr" not in lines[0]
    assert "Traceback" not in lines[0]


def test_a_lost_server_is_a_store_error_naming_the_masked_url() -> None:
    with pytest.raises(StoreError) as caught:
        open_store(f"postgresql://nobody:{SECRET}@127.0.0.1:1/x")

    assert isinstance(caught.value, TransientError)  # the daemon tries again later
    assert "postgresql://nobody:***@127.0.0.1:1/x" in str(caught.value)
    assert caught.value.__cause__ is None  # no chained library error carries the URL on


# -- against a server ----------------------------------------------------------------------------


def _bare_url(postgres: PostgresBackend) -> tuple[str, dict[str, str]]:
    """The backend's URL without its password, and the parts of the original."""
    parts = {k: str(v) for k, v in conninfo_to_dict(postgres.base_url).items()}
    if not parts.get("password"):
        pytest.skip("the server of RECONCILER_TEST_POSTGRES asks for no password")
    host, port, user, dbname = (
        parts["host"],
        parts.get("port", "5432"),
        parts["user"],
        parts["dbname"],
    )
    return with_schema(f"postgresql://{user}@{host}:{port}/{dbname}", postgres.schema), parts


def _round_trip(url: str) -> None:
    store = PostgresStore(url)
    try:
        store.put_runtime(RECORD)
        assert store.runtime("rt") == RECORD
    finally:
        store.close()


def test_the_password_may_come_from_a_passfile(
    postgres: PostgresBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, parts = _bare_url(postgres)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "missing"))
    with pytest.raises(StoreError, match="no password supplied"):
        PostgresStore(url)
    passfile = tmp_path / "pgpass"
    fields = [parts["host"], parts.get("port", "5432"), parts["dbname"], parts["user"]]
    passfile.write_text(":".join([*fields, parts["password"]]) + "\n")
    passfile.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(passfile))

    _round_trip(url)


def test_the_password_may_come_from_the_environment(
    postgres: PostgresBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, parts = _bare_url(postgres)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "missing"))
    monkeypatch.setenv("PGPASSWORD", parts["password"])

    _round_trip(url)


def test_a_wrong_password_is_one_line_without_it(
    postgres: PostgresBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, parts = _bare_url(postgres)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    wrong = url.replace(f"{parts['user']}@", f"{parts['user']}:{SECRET}@", 1)

    code, lines = _status(wrong)

    assert code == 2
    (line,) = lines
    assert f'password authentication failed for user "{parts["user"]}"' in line
    assert f"{parts['user']}:***@" in line
    assert "s3cr" not in line


def test_a_lost_connection_is_transient_and_the_next_call_connects_again(
    postgres: PostgresBackend,
) -> None:
    name = f"victim-{uuid.uuid4().hex[:8]}"
    store = PostgresStore(f"{postgres.url}&application_name={name}")
    store.put_runtime(RECORD)
    with psycopg.connect(postgres.base_url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
            "WHERE application_name = %s",
            (name,),
        )

    with pytest.raises(StoreError) as caught:
        store.runtimes()

    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith("the state store postgresql://")
    assert store.runtimes() == [RECORD]
    store.close()


def test_migrations_have_the_same_versions_as_sqlite() -> None:
    versions = [m.version for m in schema.MIGRATIONS]
    assert versions == list(range(1, schema.SCHEMA_VERSION + 1))
    for migration in schema.MIGRATIONS:
        sqlite = migration.for_types(schema.SQLITE_TYPES)
        postgres = migration.for_types(schema.POSTGRES_TYPES)
        assert len(sqlite) == len(postgres)
