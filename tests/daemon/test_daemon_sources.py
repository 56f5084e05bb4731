"""A daemon following a fleet whose module is a chart in a real OCI registry (docker-registry on
127.0.0.1): installed by digest; while the registry is down a commit that needs a new pull
waits (C7: the commit in force and its render stay, ``/status`` says why); once the registry is
back the commit is taken. Real git (`git daemon`), a real registry, in-memory clusters."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from reconciler.core.head import Head
from reconciler.core.objects import ObjectRef
from reconciler.operations.model import CommitVerdict
from tests.support.charts import CHART_TEMPLATES
from tests.support.daemons import Clocked, Fleet, GitServer, poll_and_reconcile, running_version
from tests.support.fleet_history import module_yaml, runtime_yaml
from tests.support.registries import OciRegistry, package_chart

WEB = ObjectRef("apps/v1", "Deployment", "web-system", "web-operator")


def _source(registry: OciRegistry, version: str, digest: str) -> str:
    return (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Source\nspec:\n"
        f"  url: {registry.url('web')}\n  version: {version}\n  digest: {digest}\n"
        "  plainHttp: true\n"
    )


def _runtime(version: str) -> str:
    return runtime_yaml("a", "regular", f"[{{name: widget}}, {{name: web, version: {version}}}]")


@pytest.fixture
def world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Fleet, OciRegistry, Clocked, dict[str, str]]]:
    monkeypatch.setenv("RECONCILER_SOURCE_CACHE", str(tmp_path / "sources"))
    (tmp_path / "registry").mkdir()
    registry = OciRegistry(tmp_path / "registry").start()
    digests = {
        version: registry.push(package_chart(tmp_path, "web", version, CHART_TEMPLATES))
        for version in ("1.0.0", "1.1.0")
    }
    fleet = Fleet(tmp_path)
    server = GitServer(tmp_path)
    server.start()
    clocked = Clocked(tmp_path, server)
    try:
        yield fleet, registry, clocked, digests
    finally:
        clocked.daemon.close()
        server.stop()
        registry.stop()


def test_a_registry_that_is_down_keeps_the_last_good_render_and_says_so(
    world: tuple[Fleet, OciRegistry, Clocked, dict[str, str]],
) -> None:
    fleet, registry, clocked, digests = world
    daemon = clocked.daemon
    files: dict[str, str | None] = {
        "fleet/modules/web/module.yaml": module_yaml("web"),
        "fleet/runtimes/a.yaml": _runtime("1.0.0"),
    }
    for version, digest in digests.items():
        files[f"fleet/modules/web/{version}/source.yaml"] = _source(registry, version, digest)
    installed = fleet.commit("web from the registry", files)
    assert poll_and_reconcile(daemon)
    assert daemon.state.commit == Head(installed)
    assert running_version(clocked.clusters["a"], WEB) == "1.0.0"  # pulled by digest, installed

    registry.stop()
    bump = fleet.commit("web 1.1.0", {"fleet/runtimes/a.yaml": _runtime("1.1.0")})

    assert not poll_and_reconcile(daemon)
    waiting = daemon.status()["source"]["waiting"]
    assert waiting["commit"] == bump
    assert "cannot be fetched now" in waiting["reason"]
    assert "keeps the last good render in force" in waiting["reason"]
    assert clocked.verdict(bump) is CommitVerdict.PENDING
    assert daemon.status()["source"]["refused"] is None
    assert daemon.state.commit == Head(installed)  # the last good commit, and its render
    daemon.reconcile_all(wait=True)
    assert running_version(clocked.clusters["a"], WEB) == "1.0.0"

    registry.start()
    clocked.now = datetime.fromisoformat(waiting["retryAt"]) + timedelta(seconds=1)

    assert poll_and_reconcile(daemon)
    assert daemon.state.commit == Head(bump)
    assert running_version(clocked.clusters["a"], WEB) == "1.1.0"
