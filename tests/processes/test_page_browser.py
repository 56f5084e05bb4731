"""The status page in a real browser: a `reconciler daemon` process follows the sample repo (a git
repository of this project's `sample-repo/` and `channels/`) on snapshot clusters, and headless
Chromium (Debian's, driven by Playwright) opens its pages. The fleet table shows every runtime,
the filter form narrows it, a runtime's page shows its operation tree and a blocked deletion,
a refused commit is shown with its file and line, and ``/rollouts`` (a halted and a paused
rollout written into the daemon's SQLite store) shows both, linked from the navigation.
axe-core (shipped in the axe-playwright-python package) finds no serious or critical
violation at desktop and phone widths. Screenshots of the pages at both widths go to
``RECONCILER_SCREENSHOTS`` when set (the README's are made so: see "The status page" there),
else to the test's own folder.

Skipped without Chromium or Playwright, failed under CI (``CI`` set), where `.ci/run` installs
both."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.snapshot import load_snapshot, read_generation, save_snapshot
from reconciler.core.rollouts import HaltReason, Member, MemberState, Rollout, RolloutState, Wave
from reconciler.operations.store import SqliteStore
from tests.support.daemons import free_port, http_get, http_post, until
from tests.support.fleet_history import git
from tests.support.tools import REPO, require_tool

SECRET = "page-test-secret"
#: The widths screenshots and the accessibility check are taken at: a desktop, a phone.
VIEWPORTS = {"desktop": (1280, 800), "phone": (390, 844)}
#: A user's resource of a kind serverless manages: it blocks serverless's removal (L8).
USERS_SERVERLESS = {
    "apiVersion": "operator.kyma-project.io/v1alpha1",
    "kind": "Serverless",
    "metadata": {"name": "team-a", "namespace": "kyma-system"},
    "spec": {},
}
BLOCKED = "Serverless/kyma-system/team-a"


def _playwright() -> Any:
    """Playwright's sync API, and the system's Chromium (skipped without them, failed under
    CI)."""
    chromium = require_tool("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        message = "playwright is not installed: pip install -e '.[test]'"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return sync_playwright, chromium


@dataclass
class Running:
    """The daemon process, its port, its clusters and its git repositories."""

    process: subprocess.Popen[bytes]
    port: int
    work: Path
    remote: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def status(self) -> dict[str, Any]:
        """``/status`` (empty while the port is not open yet)."""
        try:
            code, body = http_get(self.base + "/status")
        except OSError:
            return {}
        return json.loads(body) if code == 200 else {}

    def runtime(self, name: str) -> dict[str, Any]:
        found = [r for r in self.status().get("runtimes", []) if r["runtime"] == name]
        return found[0] if found else {}

    def push(self, message: str, path: str, text: str) -> None:
        (self.work / path).write_text(text, encoding="utf-8")
        git(self.work, "commit", "-qam", message)
        git(self.work, "push", "-q", str(self.remote), "HEAD:refs/heads/main")

    def sync(self) -> None:
        headers = {"Authorization": f"Bearer {SECRET}"}
        assert http_post(self.base + "/sync", b"", headers)[0] == 202


def _sample(tmp_path: Path) -> tuple[Path, Path]:
    """A git repository of the sample repo and its channels, pushed to a bare remote."""
    work, remote = tmp_path / "work", tmp_path / "remote.git"
    shutil.copytree(REPO / "sample-repo", work / "sample-repo")
    shutil.copytree(REPO / "channels", work / "channels")
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "the sample fleet")
    git(work, "push", "-q", str(remote), "HEAD:refs/heads/main")
    return work, remote


def _installed_with_a_users_resource(work: Path, clusters: Path) -> None:
    """Every runtime synced once into ``clusters`` (as ``reconciler sync`` does), then a user's
    Serverless resource in prod-eu-1."""
    done = CliRunner().invoke(
        cli, ["sync", str(work / "sample-repo"), "--snapshot", f"{clusters}/", "--snapshot-create"]
    )
    assert done.exit_code == 0, done.output
    path = clusters / "prod-eu-1.yaml"
    cluster = load_snapshot(path)
    cluster.apply(USERS_SERVERLESS, field_manager="kubectl")
    save_snapshot(cluster, path, read_generation(path) + 1)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Running]:
    """The daemon on the sample, after prod-eu-1 dropped serverless while a user's resource of
    it is left: its removal is blocked."""
    work, remote = _sample(tmp_path)
    clusters = tmp_path / "clusters"
    _installed_with_a_users_resource(work, clusters)
    secret = tmp_path / "secret"
    secret.write_text(SECRET + "\n")
    port = free_port()
    command = [sys.executable, "-m", "reconciler", "daemon", "--repo", str(remote)]
    command += ["--path", "sample-repo", "--snapshot", f"{clusters}/", "--listen"]
    command += [f"127.0.0.1:{port}", "--interval", "1h", "--resync-interval", "1h"]
    command += ["--webhook-secret-file", str(secret), "--member", "replica-a"]
    log = (tmp_path / "daemon.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=log)
    running = Running(process, port, work, remote)
    try:
        until(lambda: running.runtime("prod-eu-1").get("state") == "Ready", 60)
        prod_eu = (work / "sample-repo/runtimes/prod-eu-1.yaml").read_text(encoding="utf-8")
        dropped = prod_eu.replace("    - name: serverless\n      strategy: CreateAndDelete\n", "")
        assert dropped != prod_eu
        running.push("prod-eu-1 drops serverless", "sample-repo/runtimes/prod-eu-1.yaml", dropped)
        running.sync()
        until(lambda: running.runtime("prod-eu-1").get("state") == "Deleting", 60)
        yield running
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def _serious(page: Any) -> list[str]:
    """The serious and critical accessibility violations axe-core finds on ``page``."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [
        f"{v['id']} ({v['impact']}): {v['help']}: "
        + ", ".join(str(n["target"]) for n in v["nodes"][:3])
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def _screenshots() -> Path | None:
    folder = os.environ.get("RECONCILER_SCREENSHOTS")
    return Path(folder) if folder else None


ROWS = "table.fleet tbody th[scope=row]"


def _refuse_a_typo(daemon: Running) -> None:
    """Push a commit with a typo in dev-sandbox and wait until the daemon refuses it."""
    path = "sample-repo/runtimes/dev-sandbox.yaml"
    text = (daemon.work / path).read_text(encoding="utf-8")
    daemon.push("a typo", path, text.replace("channel:", "chanel:"))
    daemon.sync()
    until(lambda: daemon.status()["source"]["refused"] is not None, 60)


def _check_fleet(page: Any, base: str) -> None:
    """Every runtime of the sample, the refused commit with its file, and the filter form."""
    page.goto(base + "/")
    sample = sorted(p.stem for p in (REPO / "sample-repo/runtimes").glob("*.yaml"))
    assert sorted(page.locator(ROWS).all_inner_texts()) == sample
    refused = page.locator(".problem-refused").inner_text()
    assert "sample-repo/runtimes/dev-sandbox.yaml" in refused
    assert "unknown field 'chanel'" in refused
    page.get_by_label("Labels").fill("tier=prod")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/?*label=tier%3Dprod*")
    assert sorted(page.locator(ROWS).all_inner_texts()) == ["prod-ap-1", "prod-eu-1", "prod-us-1"]
    page.get_by_label("State", exact=True).select_option("Deleting")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**state=Deleting*")
    assert page.locator(ROWS).all_inner_texts() == ["prod-eu-1"]


def _check_runtime(page: Any) -> None:
    """From the filtered fleet to prod-eu-1: its blocked deletion and its operation tree."""
    page.get_by_role("link", name="prod-eu-1").click()
    page.wait_for_url("**/runtimes/prod-eu-1")
    assert page.get_by_role("heading", name="Blocked deletion").is_visible()
    assert BLOCKED in page.locator(".blocked").inner_text()
    tree = page.locator("ol.tree").first
    assert tree.is_visible()
    assert tree.locator("li.stage").count() >= 2
    assert tree.locator("li.step-retrying", has_text="Remove_Modules").count() == 1
    serverless = page.locator("table.modules tr", has_text="serverless").inner_text()
    assert "Deleting" in serverless
    assert "replica-a" in serverless


def _put_rollouts(store_path: Path, base: str) -> None:
    """A halted rollout (prod-eu-1 in Error) and a newer, paused one, in the daemon's store (its
    ``RECONCILER_STATE``; the daemon's rollout job moves neither)."""
    now = datetime.now(UTC)
    store = SqliteStore(store_path)
    for commit, state, age in (
        ("1" * 40, RolloutState.HALTED, 2),
        ("2" * 40, RolloutState.PAUSED, 1),
    ):
        halted = state is RolloutState.HALTED
        made = Rollout(
            id=commit[:12], commit=commit, created=now - timedelta(hours=age), state=state,
            waves=(Wave("eu", "region=eu", ("prod-eu-1",)), Wave("rest", "rest", ("prod-us-1",))),
            members=(
                Member("prod-eu-1", 0, MemberState.ERROR if halted else MemberState.READY, base),
                Member("prod-us-1", 1, MemberState.PENDING, base),
            ),
            healthy_for=timedelta(minutes=10), max_errors=1,
            reason=HaltReason.ERRORS if halted else None,
            message="1 runtime(s) in Error (threshold 1): prod-eu-1" if halted else "",
        )  # fmt: skip
        assert store.put_rollout(made) is not None
    store.close()


def _check_rollouts(page: Any) -> None:
    """From the navigation to ``/rollouts``: both rollouts, newest first, the halt reason, the
    command lines, and a runtime's link to its page, which shows the paused rollout holding it
    back."""
    page.get_by_role("link", name="Rollouts").click()
    page.wait_for_url("**/rollouts")
    headings = page.locator("section.rollout h2").all_inner_texts()
    assert [h.split()[1] for h in headings] == ["2" * 12, "1" * 12]
    halted = page.locator("section.rollout").nth(1).inner_text()
    assert "1 runtime(s) in Error (threshold 1): prod-eu-1" in halted
    assert f"reconciler rollout cancel {'1' * 12}" in halted
    page.locator("section.rollout").first.get_by_role("link", name="prod-us-1").click()
    page.wait_for_url("**/runtimes/prod-us-1")
    held = page.locator("dd.held").inner_text()  # the paused rollout holds it back
    assert held.startswith("held: wave rest (2 of 2): held back by rollout " + "2" * 12)
    assert held.endswith("the rollout is paused")


def _check_widths(page: Any, base: str, shots: Path) -> None:
    """At each width: no serious accessibility violation, no sideways scrolling, a screenshot
    (the whole page on a desktop, the first screen on a phone)."""
    for device, (x, y) in VIEWPORTS.items():
        page.set_viewport_size({"width": x, "height": y})
        pages = (("fleet", "/"), ("runtime", "/runtimes/prod-eu-1"), ("rollouts", "/rollouts"))
        for name, path in pages:
            page.goto(base + path)
            assert _serious(page) == [], f"{path} at {device} width"
            overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, f"{path} scrolls sideways at {device} width"
            shot = shots / f"{name}-{device}.png"
            page.screenshot(path=str(shot), full_page=device == "desktop")


def test_the_pages_in_a_browser(daemon: Running, tmp_path: Path) -> None:
    sync_playwright, chromium = _playwright()
    _refuse_a_typo(daemon)
    base = daemon.status()["source"]["commit"]
    store = os.environ["RECONCILER_STATE"].removeprefix("sqlite:///")  # tests/conftest.py's
    _put_rollouts(Path(store), base)
    shots = _screenshots() or tmp_path / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium))
        try:
            x, y = VIEWPORTS["desktop"]
            page = browser.new_page(viewport={"width": x, "height": y})
            page.set_content('<html><body><input type="text"></body></html>')
            assert _serious(page) != []  # the check sees a field without a label
            _check_fleet(page, daemon.base)
            _check_runtime(page)
            _check_rollouts(page)
            _check_widths(page, daemon.base, shots)
        finally:
            browser.close()
    assert sorted(p.name for p in shots.glob("*.png")) == [
        "fleet-desktop.png", "fleet-phone.png", "rollouts-desktop.png", "rollouts-phone.png",
        "runtime-desktop.png", "runtime-phone.png",
    ]  # fmt: skip
