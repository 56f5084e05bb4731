"""Reading a commit fails in ways that pass: a fetch git cuts while ``ls-remote`` still answers, a
channels repository (``channelsFrom.git``) that cannot be reached. Such a commit waits (PENDING,
read again after a backoff, ``/status`` says why); it is never refused for it, and the crash-loop
guard ("the daemon stopped twice while reading it") counts only reads that died.

Real git throughout: `git daemon` on 127.0.0.1, with an ``--access-hook`` that lets through or
refuses each connection as the test planned (an ``ls-remote`` and a fetch are one connection
each); the daemon's clock is a fake one the test moves past each backoff.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from reconciler.core.head import Head
from reconciler.operations.model import CommitVerdict
from tests.support.daemons import (
    T0,
    WIDGET,
    Clocked,
    Fleet,
    GitServer,
    commit_and_push,
    free_port,
    poll_and_reconcile,
)
from tests.support.fleet_history import BASE_FILES, write_tree

HOOK = """#!/bin/sh
# One line of the plan per connection: "deny" refuses it; no line left lets it through.
plan={plan}
first=$(head -n 1 "$plan" 2>/dev/null)
if [ -n "$first" ]; then sed -i 1d "$plan"; fi
[ "$first" = deny ] && exit 1
exit 0
"""


class HookedGitServer(GitServer):
    """`git daemon` whose connections go through an access hook following :meth:`plan`."""

    def __init__(self, base: Path) -> None:
        super().__init__(base)
        self.plan_file = base / "connections.plan"
        self.hook = base / "access-hook.sh"
        self.hook.write_text(HOOK.format(plan=self.plan_file))
        self.hook.chmod(0o755)

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "git",
                "daemon",
                "--reuseaddr",
                "--export-all",
                f"--access-hook={self.hook}",
                f"--base-path={self.base}",
                "--listen=127.0.0.1",
                f"--port={self.port}",
                str(self.base),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        from tests.support.daemons import until

        until(self._answers)

    def plan(self, connections: list[str]) -> None:
        """The next connections, in order: "allow" or "deny"."""
        self.plan_file.write_text("".join(f"{c}\n" for c in connections))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Fleet, HookedGitServer, Clocked]]:
    fleet = Fleet(tmp_path)
    server = HookedGitServer(tmp_path)
    server.start()
    clocked = Clocked(tmp_path, server)
    try:
        yield fleet, server, clocked
    finally:
        clocked.daemon.close()
        server.stop()


def test_a_commit_whose_fetch_git_cuts_waits_and_is_taken_once_git_heals(
    served: tuple[Fleet, HookedGitServer, Clocked],
) -> None:
    fleet, server, clocked = served
    daemon = clocked.daemon
    assert poll_and_reconcile(daemon)
    good = daemon.state.commit
    newer = fleet.commit("remove c", {"fleet/runtimes/c.yaml": None})
    server.plan(["allow", "deny", "allow", "deny"])  # ls-remote answers, the fetch is cut: twice

    assert not poll_and_reconcile(daemon)
    waiting = daemon.status()["source"]["waiting"]
    assert (waiting["commit"], waiting["failures"]) == (newer, 1)
    assert "git fetch failed" in waiting["reason"]
    assert waiting["retryAt"] == (T0 + timedelta(seconds=30)).isoformat()  # the error's delay
    clocked.later(31)
    assert not poll_and_reconcile(daemon)
    assert daemon.status()["source"]["waiting"]["failures"] == 2
    assert clocked.verdict(newer) is CommitVerdict.PENDING
    assert daemon.status()["source"]["refused"] is None
    clocked.later(61)

    assert poll_and_reconcile(daemon)  # git healed: read, judged and accepted

    assert daemon.state.commit == Head(newer) != good
    assert clocked.verdict(newer) is CommitVerdict.ACCEPTED
    assert daemon.status()["source"]["waiting"] is None
    assert clocked.clusters["c"].get(WIDGET) is None  # deprovisioned, as the commit says


def test_a_waiting_commit_is_not_read_again_before_its_backoff_ends(
    served: tuple[Fleet, HookedGitServer, Clocked],
) -> None:
    fleet, server, clocked = served
    daemon = clocked.daemon
    assert poll_and_reconcile(daemon)
    newer = fleet.commit("remove c", {"fleet/runtimes/c.yaml": None})
    server.plan(["allow", "deny"])
    assert not poll_and_reconcile(daemon)

    server.plan(["allow", "deny"])  # one ls-remote only: no fetch is tried before retryAt
    assert not poll_and_reconcile(daemon)

    assert server.plan_file.read_text() == "deny\n"
    assert daemon.status()["source"]["waiting"]["failures"] == 1
    assert clocked.verdict(newer) is CommitVerdict.PENDING


def test_a_commit_whose_channels_repository_cannot_be_reached_waits(
    served: tuple[Fleet, HookedGitServer, Clocked], tmp_path: Path
) -> None:
    """The README's promise: such a commit waits (the commit before stays in force), however
    many polls it takes, and is taken once the channels repository answers."""
    fleet, _, clocked = served
    daemon = clocked.daemon
    assert poll_and_reconcile(daemon)
    good = daemon.state.commit
    port = free_port()  # nothing listens there yet
    work, bare = tmp_path / "channels-work", tmp_path / "channels.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    channels = {k: v for k, v in BASE_FILES.items() if k.startswith("channels/")}
    write_tree(work, channels)
    commit_and_push(work, bare, "channels")
    settings = (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Settings\nmetadata: {name: fleet}\n"
        f"spec: {{channelsFrom: {{git: 'git://127.0.0.1:{port}/channels.git', ref: main, "
        "subPath: channels}}\n"
    )
    apart = fleet.commit("channels apart", {"fleet/reconciler.yaml": settings})

    for _ in range(4):
        assert not poll_and_reconcile(daemon)
        clocked.later(600)

    source = daemon.status()["source"]
    assert source["refused"] is None
    assert source["waiting"]["commit"] == apart
    assert "waits for its channels source" in source["waiting"]["reason"]
    assert clocked.verdict(apart) is CommitVerdict.PENDING
    assert daemon.state.commit == good
    channels_server = GitServer(tmp_path)
    channels_server.port = port
    channels_server.start()
    try:
        assert poll_and_reconcile(daemon)
    finally:
        channels_server.stop()

    in_force = daemon.state.commit
    assert in_force is not None
    assert (in_force.config, bool(in_force.channels)) == (apart, True)
