"""Enforcement of configuration overrides on the in-memory cluster, through whole syncs: the
``reconciler-config`` field manager owns exactly the enforced fields of the default
configuration, re-asserts them on every sync and reports a user's change; the other fields stay
the user's (L3); removing an override releases its field with its value; a deleted default
configuration comes back only while fields of it are enforced (docs/configuration.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.enforce import CONFIG_FIELD_MANAGER, owned_paths
from reconciler.core.inventory import inventory_from_configmap, inventory_ref
from reconciler.core.model import ConfigRepo, ModuleRef
from reconciler.core.objects import ObjectRef
from reconciler.core.plan_values import ObjectAction
from reconciler.core.status import ChangeAction
from reconciler.lifecycle.executor import sync_runtime
from tests.support.lifecycle_helpers import NAMESPACE, NOW, repo, sync

REPO = Path(__file__).resolve().parents[2]
WIDGET_CR = ObjectRef("example.io/v1", "Widget", NAMESPACE, "default")


def _fleet(config: dict[str, Any] | None) -> ConfigRepo:
    return repo(ModuleRef("widget", config=config), regular={"widget": "1.0.0"})


def _user_edit(cluster: InMemoryCluster, spec: dict[str, Any]) -> None:
    """A user's ``kubectl apply --server-side --force-conflicts`` of some spec fields."""
    body = {
        "apiVersion": WIDGET_CR.api_version,
        "kind": "Widget",
        "metadata": {"name": "default", "namespace": NAMESPACE},
        "spec": spec,
    }
    cluster.apply(body, field_manager="kubectl", force=True)


def _spec(cluster: InMemoryCluster) -> dict[str, Any]:
    body = cluster.get(WIDGET_CR)
    assert body is not None
    return dict(body["spec"])


def _enforced_recorded(cluster: InMemoryCluster) -> tuple[str, ...]:
    body = cluster.get(inventory_ref("reconciler-system", "widget"))
    assert body is not None
    return inventory_from_configmap(body).enforced


def test_an_override_reaches_the_cr_and_is_owned_by_its_own_field_manager() -> None:
    cluster = InMemoryCluster()
    sync(cluster, _fleet({"logLevel": "debug"}))
    assert _spec(cluster) == {"size": 3, "logLevel": "debug"}
    body = cluster.get(WIDGET_CR)
    assert body is not None
    assert owned_paths(body, CONFIG_FIELD_MANAGER) >= {("spec", "logLevel")}
    assert ("spec", "size") not in owned_paths(body, CONFIG_FIELD_MANAGER)
    assert _enforced_recorded(cluster) == ("spec.logLevel",)


def test_a_user_edit_of_another_field_survives_any_number_of_syncs() -> None:
    cluster = InMemoryCluster()
    fleet = _fleet({"logLevel": "debug"})
    sync(cluster, fleet)
    _user_edit(cluster, {"size": 7})
    for _ in range(3):
        result = sync(cluster, fleet)
        assert all(
            c.ref != WIDGET_CR or c.action is ChangeAction.UNCHANGED for c in result.outcome.changes
        )
    assert _spec(cluster) == {"size": 7, "logLevel": "debug"}


def test_a_user_edit_of_an_enforced_field_is_planned_reverted_and_reported() -> None:
    cluster = InMemoryCluster()
    fleet = _fleet({"logLevel": "debug"})
    sync(cluster, fleet)
    _user_edit(cluster, {"logLevel": "error", "size": 5})
    planned = sync_runtime(cluster, fleet, "rt", now=NOW, dry_run=True)
    change = next(c for m in planned.plan.modules for c in m.changes if c.ref == WIDGET_CR)
    assert change.action is ObjectAction.UPDATE
    assert [f.format() for f in change.fields] == ["spec.logLevel: 'error' -> 'debug'"]
    assert _spec(cluster)["logLevel"] == "error"  # a dry run changes nothing
    result = sync(cluster, fleet)
    assert _spec(cluster) == {"size": 5, "logLevel": "debug"}
    status = next(s for s in result.modules if s.module == "widget")
    assert "enforced spec.logLevel of Widget/widget-system/default" in status.message
    assert any(
        c.ref == WIDGET_CR and c.action is ChangeAction.CONFIGURED for c in result.outcome.changes
    )
    events = [e for e in cluster.events.values() if e["reason"] == "ConfigEnforced"]
    assert [e["type"] for e in events] == ["Warning"]
    assert "spec.logLevel" in events[0]["message"]
    assert "(changed in the cluster by kubectl)" in events[0]["message"]
    assert events[0]["involvedObject"]["kind"] == "Widget"


def test_an_enforced_value_changed_in_git_is_no_drift_of_the_cluster() -> None:
    """Nobody touched the cluster: git enforces another value. It is applied and said to come
    from git, a Normal Event, not a Warning that the cluster was changed."""
    cluster = InMemoryCluster()
    sync(cluster, _fleet({"logLevel": "debug"}))
    result = sync(cluster, _fleet({"logLevel": "error"}))

    assert _spec(cluster)["logLevel"] == "error"
    status = next(s for s in result.modules if s.module == "widget")
    assert "enforced spec.logLevel of Widget/widget-system/default (changed in git)" in (
        status.message
    )
    assert "changed in the cluster" not in status.message
    events = [e for e in cluster.events.values() if e["reason"] == "ConfigEnforced"]
    assert [e["type"] for e in events] == ["Normal"]


def test_removing_an_override_releases_the_field_and_its_value_stays() -> None:
    cluster = InMemoryCluster()
    sync(cluster, _fleet(None))  # created without the field: `reconciler` never owned it
    sync(cluster, _fleet({"logLevel": "debug"}))
    assert _spec(cluster) == {"size": 3, "logLevel": "debug"}
    result = sync(cluster, _fleet(None))
    assert _spec(cluster) == {"size": 3, "logLevel": "debug"}
    body = cluster.get(WIDGET_CR)
    assert body is not None
    assert not {p for p in owned_paths(body, CONFIG_FIELD_MANAGER) if p[0] == "spec"}
    assert _enforced_recorded(cluster) == ()
    status = next(s for s in result.modules if s.module == "widget")
    assert "released spec.logLevel" in status.message
    _user_edit(cluster, {"logLevel": "info"})
    sync(cluster, _fleet(None))
    assert _spec(cluster)["logLevel"] == "info"  # the user's now: never reverted


def test_dropping_a_field_its_only_manager_owns_deletes_it_which_the_release_avoids() -> None:
    cluster = InMemoryCluster()
    sync(cluster, _fleet(None))
    sync(cluster, _fleet({"logLevel": "debug"}))
    body: dict[str, Any] = {"apiVersion": WIDGET_CR.api_version, "kind": "Widget"}
    body["metadata"] = {"name": "default", "namespace": NAMESPACE}
    cluster.apply(body, field_manager=CONFIG_FIELD_MANAGER, force=True)  # no hand-over first
    assert "logLevel" not in _spec(cluster)


def test_a_deleted_default_configuration_comes_back_only_while_fields_of_it_are_enforced() -> None:
    cluster = InMemoryCluster()
    enforced = _fleet({"logLevel": "debug"})
    sync(cluster, enforced)
    cluster.delete(WIDGET_CR)
    result = sync(cluster, enforced)
    assert _spec(cluster) == {"size": 3, "logLevel": "debug"}
    assert any(
        c.ref == WIDGET_CR and c.action is ChangeAction.CREATED for c in result.outcome.changes
    )
    cluster.delete(WIDGET_CR)
    sync(cluster, _fleet(None))
    sync(cluster, _fleet(None))
    assert cluster.get(WIDGET_CR) is None  # L3: nothing enforced, the user's deletion holds
    assert _enforced_recorded(cluster) == ()


def test_a_runtime_null_releases_what_the_channel_enforces() -> None:
    cluster = InMemoryCluster()
    fleet = _fleet(None)
    channel = replace(fleet.channels["regular"], config={"widget": {"logLevel": "warn"}})
    with_channel = replace(fleet, channels={"regular": channel})
    sync(cluster, with_channel)
    assert _spec(cluster)["logLevel"] == "warn"
    runtime = replace(
        with_channel.runtimes["rt"], modules=(ModuleRef("widget", config={"logLevel": None}),)
    )
    sync(cluster, replace(with_channel, runtimes={"rt": runtime}))
    _user_edit(cluster, {"logLevel": "info"})
    sync(cluster, replace(with_channel, runtimes={"rt": runtime}))
    assert _spec(cluster)["logLevel"] == "info"


# -- the fleet diff of a pull request ------------------------------------------------------------


def test_the_fleet_diff_shows_each_changed_enforced_field_with_its_cause(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    shutil.copytree(REPO / "sample-repo", fleet / "sample-repo")
    shutil.copytree(REPO / "channels", fleet / "channels")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=fleet, check=True)
    subprocess.run([*git, "add", "-A"], cwd=fleet, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=fleet, check=True)
    runtime = fleet / "sample-repo" / "runtimes" / "prod-us-1.yaml"
    runtime.write_text(runtime.read_text().replace("logLevel: debug", "logLevel: info"))
    args = ["diff", str(fleet / "sample-repo"), "--base", "HEAD", "-o", "json"]
    result = CliRunner().invoke(cli, args)
    runtimes = {r["runtime"]: r for r in json.loads(result.output)["runtimes"]}
    assert list(runtimes) == ["prod-us-1"]
    (module,) = runtimes["prod-us-1"]["modules"]
    assert module["action"] == "reconfigure"
    assert [c["field"] for c in module["causes"]] == ["spec.modules[1].config.logLevel"]
    (change,) = module["changes"]
    assert change["fields"] == [{"path": "spec.logLevel", "old": "debug", "new": "info"}]
    assert change["defaultConfiguration"] is True


def test_a_sync_of_enforced_fields_that_hold_writes_nothing_and_reads_no_more() -> None:
    cluster = InMemoryCluster()
    fleet = _fleet({"logLevel": "debug"})
    sync(cluster, fleet)
    sync(cluster, fleet)
    before = dict(cluster.calls)
    sync(cluster, fleet)
    calls = {k: v - before.get(k, 0) for k, v in cluster.calls.items() if v != before.get(k, 0)}
    assert calls.get("apply", 0) == calls.get("patch", 0) == calls.get("get", 0) == 0


def test_the_report_of_a_reverted_field_stays_while_the_operator_is_not_available() -> None:
    cluster = InMemoryCluster(auto_ready=False)
    fleet = _fleet({"logLevel": "debug"})
    sync(cluster, fleet)
    _user_edit(cluster, {"logLevel": "error"})
    result = sync(cluster, fleet)
    status = next(s for s in result.modules if s.module == "widget")
    assert status.reason == "WaitingForOperator"
    assert "enforced spec.logLevel" in status.message
