"""The status page on the daemon's port, through HTTP: a real server on 127.0.0.1 in front of a
real daemon following a local git repository (a fleet of three runtimes on in-memory clusters,
a real SQLite store). What the pages show, their filters, a blocked deletion and its operation
tree, a refused commit with its file and line, escaping of whatever a commit says, and the
answers to what the page does not serve."""

from __future__ import annotations

import html
import json
import re
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ClusterAccess
from reconciler.daemon.http import HttpServer, serve
from reconciler.daemon.page import render_page
from reconciler.daemon.service import Daemon
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.daemons import Fleet, http_get, http_post, poll_and_reconcile
from tests.support.fleet_history import runtime_yaml
from tests.support.scenarios import USER_GADGET

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
    body = render_page("missing.html", message=f"<b>{token}</b>", here="").decode()

    assert token not in body
    assert "&lt;b&gt;***&lt;/b&gt;" in body
