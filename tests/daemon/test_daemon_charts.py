"""The daemon takes chart modules by the same path as the commands: a commit adding one reaches
the clusters rendered with each runtime's values, a channel's value change is applied, and a
value the chart's values.schema.json refuses keeps the last good commit in force (C7), the
refusal naming the file and line that set it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.head import Head
from reconciler.core.model import ClusterAccess
from reconciler.core.objects import ObjectRef
from reconciler.daemon.service import Daemon
from reconciler.operations.model import CommitRecord, CommitVerdict
from reconciler.operations.store import SqliteStore
from reconciler.source.git import RemoteSource
from tests.support.charts import chart_module_files
from tests.support.daemons import Fleet, ServedDaemon, poll_and_reconcile
from tests.support.daemons import served as world
from tests.support.fleet_history import runtime_yaml
from tests.support.repos import API, dump

__all__ = ["world"]  # the fixture (tests.support.daemons.served)

SETTINGS_MAP = ObjectRef("v1", "ConfigMap", "web-system", "web-settings")
BOMB = "fleet/modules/web/1.0.0/chart/templates/bomb.yaml"
SCHEMA = {"type": "object", "properties": {"size": {"enum": ["small", "medium", "large"]}}}


def _channel(size: str) -> str:
    spec: dict[str, Any] = {"modules": {"widget": "1.0.0", "gadget": "1.0.0", "web": "1.0.0"}}
    spec["values"] = {"web": {"size": size}}
    document = {"apiVersion": API, "kind": "Channel", "metadata": {"name": "regular"}}
    return dump({**document, "spec": spec})


def _size(cluster: InMemoryCluster) -> Any:
    body = cluster.get(SETTINGS_MAP)
    assert body is not None
    return body["data"]["size"]


def _commit_web(fleet: Fleet, entry: str, more: dict[str, str] | None = None) -> None:
    """Commit module ``web`` as a chart, on runtime ``a`` with ``entry``, size medium."""
    chart = {f"fleet/{k}": v for k, v in chart_module_files("web").items()}
    entries = f"[{{name: widget}}, {{name: gadget}}, {entry}]"
    runtime = {"fleet/runtimes/a.yaml": runtime_yaml("a", "regular", entries)}
    channel = {"channels/regular.yaml": _channel("medium")}
    fleet.commit("web as a chart", {**chart, **channel, **runtime, **(more or {})})


def test_chart_values_reach_the_clusters_and_a_refused_value_changes_nothing(
    world: Any,
) -> None:
    fleet, _, daemon, clusters = world
    schema = {"fleet/modules/web/1.0.0/chart/values.schema.json": json.dumps(SCHEMA)}
    _commit_web(fleet, "{name: web, values: {greeting: ahoy}}", schema)
    assert poll_and_reconcile(daemon)
    assert _size(clusters["a"]) == "medium"
    assert clusters["a"].get(SETTINGS_MAP)["data"]["greeting"] == "ahoy"

    fleet.commit("bigger", {"channels/regular.yaml": _channel("large")})
    assert poll_and_reconcile(daemon)
    assert _size(clusters["a"]) == "large"

    good, writes = daemon.state.commit, clusters["a"].writes
    bad = fleet.commit("typo", {"channels/regular.yaml": _channel("huge")})
    assert not poll_and_reconcile(daemon)
    assert daemon.state.commit == good
    assert clusters["a"].writes == writes
    refused = daemon.status()["source"]["refused"]
    assert refused["commit"] == bad
    (error,) = refused["errors"]
    assert error["path"].endswith("channels/regular.yaml")
    assert error["rule"] == "C9"
    assert error["pointer"] == "/spec/values/web/size"
    assert "'huge' is not one of" in error["message"]


def test_a_daemon_started_on_a_commit_in_force_whose_chart_bombs_stays_up_and_follows_a_revert(
    world: ServedDaemon, tmp_path: Path
) -> None:
    fleet, server, first, clusters = world
    _commit_web(fleet, "{name: web}")
    assert poll_and_reconcile(first)
    good = first.state.commit
    # a template that asks Helm's engine for 100 GB, accepted (a `now` guard was false then)
    bomb = fleet.commit("time bomb", {BOMB: '{{ repeat 100000000000 "x" }}\n'})
    accepted = CommitRecord(Head(bomb), CommitVerdict.ACCEPTED, datetime.now(UTC))
    assert first.store.accept_commit(accepted, good) is not None
    first.close()

    def connect(access: ClusterAccess, name: str) -> InMemoryCluster:
        return clusters.setdefault(name, InMemoryCluster())

    source = RemoteSource(server.url, "main", "fleet", tmp_path / "cache")
    store = SqliteStore(tmp_path / "state.db")
    started = Daemon(source, store, connect, lambda: datetime.now(UTC))
    try:
        poll_and_reconcile(started)  # loads the commit in force: its render fails, in a worker
        assert started.state.commit != Head(bomb)
        revert = fleet.commit("revert the bomb", {BOMB: None})
        assert poll_and_reconcile(started)
        assert started.state.commit == Head(revert)
        assert _size(clusters["a"]) == "medium"
    finally:
        started.close()
