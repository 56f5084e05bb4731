"""A real ``reconciler daemon`` process on a PostgreSQL server of its own that is stopped and
started again mid-run: every store error inside the scheduler's jobs is one log line (transient:
with when it is tried again), once per outage and one more when it is over, never a traceback
and never ``internal error``; the daemon is ready again once the server is back.

The server is this test's own (initdb in a temporary folder, ``pg_ctl stop`` and ``start``), so
stopping it disturbs no other test; it needs PostgreSQL's server programs (as
``tests/pg_server.sh`` does): skipped without them, failed under CI.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.daemons import Fleet, free_port, http_get, until


def _bindir() -> Path | None:
    given = os.environ.get("PG_BINDIR")
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if given:
        return Path(given)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@dataclass
class Server:
    """A throwaway PostgreSQL server: ``stop`` and ``start`` it at will."""

    bindir: Path
    data: Path
    port: int
    owner: list[str]

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres?connect_timeout=2"

    def _ctl(self, *args: str) -> None:
        command = [*self.owner, str(self.bindir / "pg_ctl"), "-D", str(self.data), *args]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        options = f"-c listen_addresses=127.0.0.1 -c port={self.port} "
        options += f"-c unix_socket_directories={self.data.parent} -c fsync=off"
        self._ctl(
            "-l", str(self.data.parent / "server.log"), "-w", "-t", "60", "-o", options, "start"
        )

    def stop(self) -> None:
        self._ctl("-m", "fast", "-w", "stop")


@pytest.fixture
def postgres() -> Iterator[Server]:
    bindir = _bindir()
    if bindir is None:
        message = "no PostgreSQL server programs (bash tests/pg_server.sh --install ...)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    work = Path(tempfile.mkdtemp(prefix="reconciler-pg.", dir="/tmp"))  # reachable by postgres
    owner: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses root: as tests/pg_server.sh, the postgres user
        owner = ["runuser", "-u", "postgres", "--"]
        shutil.chown(work, "postgres")
    initdb = [*owner, str(bindir / "initdb"), "-D", str(work / "data"), "-U", "postgres"]
    initdb += ["--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"]
    subprocess.run(initdb, check=True, capture_output=True, timeout=120)
    server = Server(bindir, work / "data", free_port(), owner)
    try:
        server.start()
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


def _both_more(failed: Callable[[str], int], before: tuple[int, int]) -> bool:
    """More failed polls and more failed heartbeats logged than ``before``."""
    return failed("poll") > before[0] and failed("heartbeat") > before[1]


def _ready(base: str) -> bool:
    try:
        return http_get(base + "/readyz")[0] == 200
    except OSError:
        return False


def test_store_errors_in_the_jobs_are_one_line_each_and_the_daemon_recovers(
    tmp_path: Path, postgres: Server
) -> None:
    Fleet(tmp_path)
    port = free_port()
    log = tmp_path / "daemon.log"
    env = {**os.environ, "HOME": str(tmp_path), "RECONCILER_STATE": postgres.url}
    command = [sys.executable, "-m", "reconciler", "daemon", "--repo", str(tmp_path / "remote.git")]
    command += ["--path", "fleet", "--interval", "1s", "--lease", "3s", "--resync-interval", "2s"]
    command += ["--listen", f"127.0.0.1:{port}", "--snapshot", f"{tmp_path / 'clusters'}/"]
    command += ["--snapshot-create"]
    command += ["--state", postgres.url]  # explicit: with --snapshot, else a SQLite of its own
    with log.open("wb") as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=output)
    base = f"http://127.0.0.1:{port}"
    logged: Callable[[], str] = log.read_text

    def failed(job: str) -> int:
        return sum(": " + job + ": " in line for line in logged().splitlines())

    def recovered(job: str) -> int:  # a failure is logged once, then once when over
        return sum(": " + job + " works again" in line for line in logged().splitlines())

    try:
        until(lambda: _ready(base), seconds=60)
        for _ in range(2):  # two short outages
            before = (failed("poll"), failed("heartbeat"))
            postgres.stop()
            until(functools.partial(_both_more, failed, before), seconds=60)
            over = (recovered("poll"), recovered("heartbeat"))
            postgres.start()
            until(lambda: _ready(base), seconds=60)
            until(functools.partial(_both_more, recovered, over), seconds=60)
    finally:
        process.terminate()
        process.wait(timeout=60)
    text = logged()
    assert "Traceback" not in text, text
    assert "internal error" not in text, text
    jobs = [line for line in text.splitlines() if ": poll: " in line or ": heartbeat: " in line]
    assert jobs, text
    assert all("StoreError, transient: retried " in line for line in jobs), jobs
