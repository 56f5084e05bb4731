"""The status page on the daemon's port, through HTTP: a real server on 127.0.0.1 in front of a
real daemon following a local git repository (a fleet of three runtimes on in-memory clusters,
a real SQLite store). What the pages show, their filters, a blocked deletion and its operation
tree, a refused commit with its file and line, escaping of whatever a commit says, and the
answers to what the page does not serve."""

from __future__ import annotations

import html
import json
import re
import sqlite3
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.head import head_text
from reconciler.core.model import ClusterAccess
from reconciler.core.rollouts import HaltReason, Member, MemberState, Rollout, RolloutState, Wave
from reconciler.daemon.http import HttpServer, serve
from reconciler.daemon.page import Pages, render_page
from reconciler.daemon.page_model import FleetQuery, SourceView, fleet_view, refused_problem
from reconciler.daemon.page_rollouts import rollouts_view
from reconciler.daemon.service import Daemon, DaemonOptions
from reconciler.errors import StoreError
from reconciler.operations.model import RuntimeRecord
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from reconciler.source.signatures import TrustedKeys
from tests.support.daemons import Fleet, http_get, http_post, poll_and_reconcile
from tests.support.fleet_history import BASE_FILES, runtime_yaml, write_tree
from tests.support.scenarios import USER_GADGET
from tests.support.signing import Keys, SshKey, keys, signed_commit
from tests.support.signing import git as signing_git
from tests.support.sources import UnusedSource

__all__ = ["keys"]  # the fixture


def _now() -> datetime:
    return datetime.now(UTC)


def _no_cluster(access: ClusterAccess, name: str) -> InMemoryCluster:
    raise AssertionError("the page never reaches a cluster")


APPS = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}


class Served:
    """The daemon, its port, its clusters and its repository."""

    def __init__(self, tmp_path: Path) -> None:
        self.fleet = Fleet(tmp_path)
        self.clusters: dict[str, InMemoryCluster] = {}
        source = RemoteSource(
            str(tmp_path / "remote.git"), "main", "fleet", tmp_path / "cache", local=True
        )
        store = SqliteStore(tmp_path / "state.db")
        self.daemon = Daemon(source, store, self.connect, lambda: datetime.now(UTC))
        self.server: HttpServer = serve(self.daemon, "127.0.0.1", 0, None)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def connect(self, access: ClusterAccess, name: str) -> InMemoryCluster:
        return self.clusters.setdefault(name, InMemoryCluster())

    def page(self, path: str) -> str:
        status, body = http_get(self.base + path)
        assert status == 200, body
        return body

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.daemon.wait_idle()
        self.daemon.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    running = Served(tmp_path)
    poll_and_reconcile(running.daemon)
    yield running
    running.close()


def _rows(page: str) -> list[str]:
    """The runtimes of the fleet table, in order."""
    return re.findall(r'<th scope="row" data-label="Runtime"><a href="/runtimes/([^"]+)"', page)


def test_the_fleet_shows_every_runtime_with_counts_and_html_headers(served: Served) -> None:
    with urllib.request.urlopen(served.base + "/", timeout=10) as response:
        headers = response.headers
        page = response.read().decode()

    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert "script-src" not in headers["Content-Security-Policy"]
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert _rows(page) == ["a", "b", "c"]
    assert '<span class="count">3</span> all' in page
    assert "<script" not in page
    assert served.daemon.state.commit is not None
    assert served.daemon.state.commit.config[:8] in page


def test_filters_are_query_parameters(served: Served) -> None:
    assert _rows(served.page("/?q=b")) == ["b"]
    assert _rows(served.page("/?state=Ready&q=c")) == ["c"]
    assert _rows(served.page("/?state=Error")) == []
    assert "No runtime matches these filters." in served.page("/?state=Error")
    bad = served.page("/?label=tier%3D(x")
    assert _rows(bad) == []
    assert "Label selector:" in bad


def test_pages_of_the_table_link_to_each_other_keeping_the_filters(served: Served) -> None:
    page = served.page("/?per_page=1&page=2&state=Ready")

    assert _rows(page) == ["b"]
    assert '<a rel="prev" href="?state=Ready&amp;per_page=1">' in page
    assert '<a rel="next" href="?state=Ready&amp;page=3&amp;per_page=1">' in page
    assert "Page 2 of 3" in page


def test_a_label_or_a_module_in_the_table_links_to_its_filter(served: Served) -> None:
    page = served.page("/?q=a")

    assert '<a class="module" href="?module=gadget&amp;q=a">gadget</a>' in page
    assert _rows(served.page("/?q=a&module=gadget")) == ["a"]


def test_a_blocked_deletion_and_its_operation_tree(served: Served) -> None:
    for body in (APPS, USER_GADGET):
        served.clusters["a"].apply(body, field_manager="kubectl")
    served.fleet.commit(
        "a drops gadget",
        {"fleet/runtimes/a.yaml": runtime_yaml("a", "regular", "[{name: widget}]")},
    )
    poll_and_reconcile(served.daemon)

    fleet = served.page("/")
    page = served.page("/runtimes/a")

    assert _rows(fleet)[0] == "a"  # Deleting before Ready
    assert "Blocked deletion" in page
    assert "Gadget/apps/mine" in page
    assert re.search(r"<h1>Runtime a <span class=\"state state-deleting\">Deleting</span>", page)
    assert "stage " in page
    assert re.search(r'<li class="step step-(retrying|running|pending)">', page)
    assert "Operations" in page
    assert _rows(served.page("/?module=gadget&state=Deleting")) == ["a"]


def test_a_refused_commit_shows_file_line_and_is_escaped(served: Served) -> None:
    hostile = '"<img src=x onerror=alert(1)>"'
    text = runtime_yaml("c", "fast", "[{name: widget}]") + f"  {hostile}: 1\n"
    served.fleet.commit("bad", {"fleet/runtimes/c.yaml": text})
    served.daemon.poll()

    page = served.page("/")

    assert "refused" in page
    assert "<img" not in page
    assert html.escape("<img src=x onerror=alert(1)>", quote=True) in page
    assert "<code>fleet/runtimes/c.yaml</code>" in page
    assert "How to let it through:" in page


def test_what_the_page_does_not_serve(served: Served) -> None:
    status, body = http_get(served.base + "/runtimes/aa")
    assert status == 404
    assert "no runtime &#39;aa&#39;" in body
    assert "did you mean" in body
    status, body = http_get(served.base + "/runtimes/%3Cx%3E")
    assert status == 404
    assert "<x>" not in body
    status, body = http_post(served.base + "/", b"", {})
    assert (status, json.loads(body)["error"]) == (405, "/ answers GET and HEAD only")
    with urllib.request.urlopen(served.base + "/static/page.css", timeout=10) as response:
        assert response.headers["Content-Type"] == "text/css; charset=utf-8"
        assert b"@media" in response.read()
    head = urllib.request.Request(served.base + "/", method="HEAD")
    with urllib.request.urlopen(head, timeout=10) as response:
        assert response.read() == b""


def test_a_name_that_is_no_runtime_name_is_refused_without_a_search(served: Served) -> None:
    status, body = http_get(served.base + "/runtimes/" + "x" * 5000 + "%21")
    assert status == 404
    assert "is no runtime name" in body
    assert "did you mean" not in body


def test_what_a_page_prints_has_secrets_masked_and_html_escaped() -> None:
    token = "ghp_" + "a" * 36
    body = render_page("problem.html", title="t", message=f"<b>{token}</b>", here="").decode()

    assert token not in body
    assert "&lt;b&gt;***&lt;/b&gt;" in body


def test_a_signature_refusal_is_a_table_of_the_commits_to_blame() -> None:
    signature = {"commit": "f" * 40, "status": "UntrustedKey", "key": "SHA256:abc"}
    problem = refused_problem("f" * 40, "refused", [], [signature | {"reason": "untrusted"}])
    source = SourceView(commit="a" * 40, problems=(problem,))
    view = fleet_view([], FleetQuery(), source, datetime.now(UTC))

    page = render_page("fleet.html", view=view, here="/").decode()

    assert "<caption>Commits without a good signature from a trusted key</caption>" in page
    assert '<td data-label="Signature">UntrustedKey</td>' in page
    assert "<code>SHA256:abc</code>" in page


def _push_signed(work: Path, remote: Path, message: str, key: SshKey) -> str:
    commit = signed_commit(work, message, key)
    signing_git(work, "push", "-q", str(remote), "HEAD:refs/heads/main")
    return commit


def test_a_commit_refused_for_its_signature_shows_the_commit_and_its_key(
    keys: Keys, tmp_path: Path
) -> None:
    alice, mallory = keys.ssh("alice"), keys.ssh("mallory")
    work, remote = tmp_path / "work", tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    write_tree(work, dict(BASE_FILES))
    signing_git(work, "init", "-q", "-b", "main")
    _push_signed(work, remote, "base", alice)
    signers = tmp_path / "allowed_signers"
    signers.write_text(alice.signers_line)
    source = RemoteSource(str(remote), "main", "fleet", tmp_path / "cache", local=True)
    daemon = Daemon(
        source,
        SqliteStore(tmp_path / "state.db"),
        lambda access, name: InMemoryCluster(),
        lambda: datetime.now(UTC),
        DaemonOptions(trusted_keys=TrustedKeys(ssh_signers=(signers,))),
    )
    poll_and_reconcile(daemon)
    bad = _push_signed(work, remote, "by mallory", mallory)
    daemon.poll()

    page = Pages(daemon).respond("/", "").body.decode()
    daemon.close()

    assert f'Commit <code title="{bad}">{bad[:12]}</code> refused' in page
    assert '<td data-label="Signature">UntrustedKey</td>' in page
    assert "Push a new commit signed by a trusted key" in page


class _StoreDown(SqliteStore):
    """A state store whose database cannot be reached (PostgreSQL restarting)."""

    def runtimes(self) -> list[RuntimeRecord]:
        raise StoreError("the state store at postgresql://db/reconciler cannot be reached")


def test_a_store_that_cannot_be_read_is_a_503_page(tmp_path: Path) -> None:
    daemon = Daemon(UnusedSource(), _StoreDown(tmp_path / "state.db"), _no_cluster, _now)

    answer = Pages(daemon).respond("/", "")
    daemon.close()

    assert answer.status == 503
    assert "cannot read the daemon&#39;s state now (StoreError)" in answer.body.decode()


BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def _browse(url: str, accept: str = BROWSER) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def _put_rollouts(served: Served) -> tuple[Rollout, Rollout]:
    """A halted rollout (b in Error) and a newer one under way (a Ready, healthy since 2m)."""
    now = _now()
    base = head_text(served.daemon.state.commit)
    halted = Rollout(
        id="1" * 12, commit="1" * 40, created=now - timedelta(hours=1),
        state=RolloutState.HALTED,
        waves=(Wave("canary", "tier=canary", ("b",)), Wave("rest", "the rest", ("a", "c"))),
        members=(
            Member("b", 0, MemberState.ERROR, base), Member("a", 1, MemberState.PENDING, base),
            Member("c", 1, MemberState.SKIPPED, base, "suspended"),
        ),
        healthy_for=timedelta(minutes=10), max_errors=1, reason=HaltReason.ERRORS,
        message="1 runtime(s) in Error (threshold 1): b; <b>push a fixing commit</b>",
        updated=now - timedelta(minutes=50),
    )  # fmt: skip
    running = Rollout(
        id="2" * 12, commit="2" * 40, created=now - timedelta(minutes=5),
        state=RolloutState.PROGRESSING,
        waves=(Wave("first", "10%", ("a",)), Wave("rest", "the rest", ("b", "c"))),
        members=(
            Member("a", 0, MemberState.READY, base), Member("b", 1, MemberState.PENDING, base),
            Member("c", 1, MemberState.PENDING, base),
        ),
        healthy_for=timedelta(minutes=10), max_errors=1,
        healthy_since=now - timedelta(minutes=2), updated=now,
    )  # fmt: skip
    for made in (halted, running):
        assert served.daemon.store.put_rollout(made) is not None
    return halted, running


def test_the_rollouts_page_shows_each_rollout_newest_first(served: Served) -> None:
    halted, running = _put_rollouts(served)

    status, headers, page = _browse(served.base + "/rollouts")

    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Vary"] == "Accept"
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert "<script" not in page
    assert '<li><a href="/rollouts" aria-current="page">Rollouts</a></li>' in page
    ids = re.findall(r'<h2 id="rollout-(\w+)">', page)
    assert ids == [running.id, halted.id]
    shown_running, shown_halted = page.split('<h2 id="rollout-')[1:]
    assert "Progressing" in shown_running
    assert "first (wave 1 of 2)" in shown_running
    assert "the next wave starts in " in shown_running  # the figure: test_page_rollouts.py
    assert "(healthy for 10m)" in shown_running
    assert f"<code>reconciler rollout pause {running.id}</code>" in shown_running
    assert f"<code>reconciler rollout promote {running.id}</code>" in shown_running
    assert "Halted" in shown_halted
    assert "(FailureThreshold)" in shown_halted
    assert "&lt;b&gt;push a fixing commit&lt;/b&gt;" in shown_halted
    assert "<b>push" not in page
    assert f"reconciler rollout cancel {halted.id}" in shown_halted
    assert "rollout resume" not in shown_halted
    assert "rollout pause" not in shown_halted
    assert '<th scope="row" data-label="Runtime"><a href="/runtimes/b">b</a></th>' in page
    assert "<caption>Wave 1 of rollout 111111111111: canary (tier=canary), halted" in page
    assert '<th scope="col">Runtime</th>' in page


def test_rollouts_stay_json_for_the_cli_and_the_page_links_to_them(served: Served) -> None:
    halted, running = _put_rollouts(served)

    for accept in ("", "*/*", "application/json", "application/json, text/html"):
        status, headers, body = _browse(served.base + "/rollouts", accept)
        assert (status, headers["Content-Type"]) == (200, "application/json"), accept
        assert headers["Vary"] == "Accept"
        assert [r["id"] for r in json.loads(body)["items"]] == [running.id, halted.id]
    assert '<a href="/rollouts">Rollouts</a>' in served.page("/")
    status, _, one = _browse(served.base + f"/rollouts?id={halted.id[:6]}")
    assert status == 200
    assert re.findall(r'<h2 id="rollout-(\w+)">', one) == [halted.id]
    status, _, missing = _browse(served.base + "/rollouts?id=ffff")
    assert status == 404
    assert "no rollout &#39;ffff&#39;" in missing


def test_the_json_list_of_rollouts_decodes_no_runtime(served: Served) -> None:
    """``GET /rollouts`` answers from the rollouts' summaries, the same bytes as from the whole
    rollouts: with every runtime's record spoilt in the database, it answers as before."""
    _put_rollouts(served)
    before = _browse(served.base + "/rollouts", "application/json")[2]
    store = served.daemon.store
    assert isinstance(store, SqliteStore)
    with sqlite3.connect(store.path) as database:
        database.execute("UPDATE rollouts SET data = json_set(data, '$.members', 'spoilt')")
    database.close()

    status, _, after = _browse(served.base + "/rollouts", "application/json")

    assert status == 200
    assert after == before
    assert [r["id"] for r in json.loads(after)["items"]] == ["2" * 12, "1" * 12]


def test_no_rollout_yet_says_how_one_starts(served: Served) -> None:
    status, _, page = _browse(served.base + "/rollouts")

    assert status == 200
    assert "No rollout recorded" in page


def test_a_cancel_reason_on_the_rollouts_page_has_its_secrets_masked() -> None:
    token = "ghp_" + "b" * 36
    canceled = Rollout(
        id="3" * 12, commit="3" * 40, created=_now(), state=RolloutState.CANCELED,
        waves=(Wave("all", "the rest", ("a",)),), members=(Member("a", 0, MemberState.READY, ""),),
        healthy_for=timedelta(minutes=1), max_errors=1, reason=HaltReason.CANCELED,
        message=f"<i>leaked {token}</i>",
    )  # fmt: skip
    view = rollouts_view([canceled], SourceView(), _now())

    page = render_page("rollouts.html", view=view, here="/rollouts").decode()

    assert token not in page
    assert "&lt;i&gt;leaked ***&lt;/i&gt;" in page
    assert "How to act on it" not in page  # a canceled rollout takes no command


def _commit_cell(page: str, runtime: str) -> str:
    """The Commit cell of ``runtime``'s row of the fleet table."""
    row = page.split(f'<a href="/runtimes/{runtime}">{runtime}</a></th>')[1].split("</tr>")[0]
    return row.split('<td data-label="Commit">')[1].split("</td>")[0]


def test_a_runtime_a_newer_commit_does_not_change_shows_the_commit_in_force(
    served: Served,
) -> None:
    before = head_text(served.daemon.state.commit)
    served.fleet.commit(
        "c gets gadget",
        {"fleet/runtimes/c.yaml": runtime_yaml("c", "fast", "[{name: widget}, {name: gadget}]")},
    )
    assert served.daemon.poll()  # reconciles c alone: the commit changes nothing of a and b
    served.daemon.wait_idle()
    in_force = head_text(served.daemon.state.commit)

    fleet = served.page("/")
    page = served.page("/runtimes/a")

    record = served.daemon.store.runtime("a")
    assert record is not None
    assert head_text(record.commit) == before  # not reconciled again: nothing changed for it
    for runtime in ("a", "b"):
        cell = _commit_cell(fleet, runtime)
        assert f">{in_force[:8]}</code>" in cell
        assert '<span class="in-sync">in sync</span>' in cell
    assert _commit_cell(fleet, "c") == f"<code>{in_force[:8]}</code>"  # reconciled there
    assert f"<code>{in_force[:8]}</code>" in page
    assert f"(in sync: the commits since {before[:8]}, where it was last reconciled" in page


def test_runtimes_a_rollout_holds_back_are_marked_on_the_fleet_and_their_page(
    served: Served,
) -> None:
    _, running = _put_rollouts(served)

    fleet = served.page("/")
    page = served.page("/runtimes/b")

    link = f'<a class="held" href="/rollouts?id={running.id}"'
    for runtime in ("b", "c"):
        row = fleet.split(f'<a href="/runtimes/{runtime}">{runtime}</a></th>')[1].split("</tr>")[0]
        assert link in row
        assert ">held: wave rest (2 of 2)</a>" in row
        assert "its wave starts once wave first (1 of 2) stays healthy" in row
    row_a = fleet.split('<a href="/runtimes/a">a</a></th>')[1].split("</tr>")[0]
    assert 'class="held"' not in row_a  # its wave is under way
    assert "<dt>Rollout</dt>" in page
    assert f'<a href="/rollouts?id={running.id}">held: wave rest (2 of 2)</a>' in page
    assert f"held back by rollout {running.id} of commit {running.id}" in page
