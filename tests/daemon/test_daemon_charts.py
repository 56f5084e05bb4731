"""The daemon takes chart modules by the same path as the commands: a commit adding one reaches
the clusters rendered with each runtime's values, a channel's value change is applied, and a
value the chart's values.schema.json refuses keeps the last good commit in force (C7), the
refusal naming the file and line that set it; CRDs the chart stops rendering by a change of
values are counted by the deletion brake."""

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
from tests.support.charts import chart_module_files, templates_with_crds
from tests.support.crds import namespaced_crd
from tests.support.daemons import Fleet, ServedDaemon, poll_and_reconcile
from tests.support.daemons import served as world
from tests.support.fleet_history import SETTINGS, runtime_yaml
from tests.support.http_fakes import CountingServer
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


def test_crds_a_chart_drops_by_its_values_are_held_by_the_brake(world: Any) -> None:
    fleet, _, daemon, clusters = world
    crds = [namespaced_crd("example.io", f"Thing{i}") for i in range(5)]
    defaults = {"greeting": "hello", "size": "small", "replicas": 1, "crds": True}
    chart = chart_module_files("web", defaults=defaults, templates=templates_with_crds(crds))
    limit = SETTINGS.replace("spec: {", "spec: {deletionBrake: {maxDeletionsPerSync: 3}, ")
    fleet.commit(
        "web as a chart, with its CRDs; a brake of 3",
        {
            "fleet/reconciler.yaml": limit,
            **{f"fleet/{k}": v for k, v in chart.items()},
            "channels/regular.yaml": _channel("medium"),
            "fleet/runtimes/a.yaml": runtime_yaml("a", "regular", "[{name: web}]"),
        },
    )
    assert poll_and_reconcile(daemon)
    names = sorted(c["metadata"]["name"] for c in crds)
    kept = [ObjectRef("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", n) for n in names]
    assert all(clusters["a"].get(ref) is not None for ref in kept)
    good = daemon.state.commit

    dropped = fleet.commit(
        "no CRDs",
        {
            "fleet/runtimes/a.yaml": runtime_yaml(
                "a", "regular", "[{name: web, values: {crds: false}}]"
            )
        },
    )
    assert not poll_and_reconcile(daemon)

    assert daemon.state.commit == good
    held = daemon.status()["source"]["held"]
    assert held["commit"] == dropped
    assert held["crds"] == [f"a/web/{n}" for n in names]
    assert all(clusters["a"].get(ref) is not None for ref in kept)


def test_a_commit_whose_chart_schema_names_a_url_is_refused_before_anything_is_fetched(
    world: Any,
) -> None:
    """The schema's reference is refused by rule (C6) while the commit is judged: no request
    reaches the host it names, and the commit in force stays."""
    fleet, _, daemon, clusters = world
    chart = {f"fleet/{k}": v for k, v in chart_module_files("web").items()}
    chart["fleet/modules/web/1.0.0/chart/values.schema.json"] = json.dumps(SCHEMA)
    entries = "[{name: widget}, {name: gadget}, {name: web}]"
    runtime = {"fleet/runtimes/a.yaml": runtime_yaml("a", "regular", entries)}
    fleet.commit("web", {**chart, "channels/regular.yaml": _channel("medium"), **runtime})
    assert poll_and_reconcile(daemon)
    good, writes = daemon.state.commit, clusters["a"].writes
    served = CountingServer(json.dumps({"enum": ["medium"]}).encode())
    try:
        fetching = {"type": "object", "properties": {"size": {"$ref": f"{served.url}/s.json"}}}
        path = "fleet/modules/web/1.0.0/chart/values.schema.json"
        bad = fleet.commit("schema from elsewhere", {path: json.dumps(fetching)})
        assert not poll_and_reconcile(daemon)
    finally:
        served.close()

    assert served.requests == []
    assert daemon.state.commit == good
    assert clusters["a"].writes == writes
    refused = daemon.status()["source"]["refused"]
    assert refused["commit"] == bad
    (error,) = refused["errors"]
    assert (error["rule"], error["pointer"]) == ("C6", "/properties/size/$ref")
    assert error["path"].endswith("chart/values.schema.json")
