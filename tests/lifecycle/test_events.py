"""Kubernetes Events of what a sync did (one per module and sync) and on the objects it refuses to
delete: ``kubectl get events`` and ``kubectl describe`` tell what the reconciler did.

On the in-memory cluster (its Events as the server stores them), and through the real adapter
against an HTTP server on 127.0.0.1 that answers as a kube-apiserver does for Events.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli.clusters import Access
from reconciler.cli.options import ClusterOptions
from reconciler.cluster.api import ObjectEvent
from reconciler.cluster.kube import KubeCluster
from reconciler.cluster.memory import Fault, InMemoryCluster
from reconciler.core.events import module_event_text
from reconciler.core.model import ClusterAccess, ModuleRef
from reconciler.core.objects import ObjectRef
from reconciler.core.status import ChangeAction, ChangeSetEntry, ModuleState
from reconciler.errors import ServerError
from tests.support.http_fakes import NOT_FOUND, Answer, JsonServer, discovery, write_kubeconfig
from tests.support.lifecycle_helpers import repo, sync
from tests.support.scenarios import USER_GADGET

OPERATOR = ObjectRef("apps/v1", "Deployment", "widget-system", "widget-operator")


def _events(cluster: InMemoryCluster) -> list[dict[str, Any]]:
    return sorted(cluster.events.values(), key=lambda e: e["metadata"]["name"])


def _about(cluster: InMemoryCluster, ref: ObjectRef) -> list[tuple[str, str, int]]:
    return [
        (e["reason"], e["type"], e["count"])
        for e in _events(cluster)
        if e["involvedObject"]["kind"] == ref.kind and e["involvedObject"]["name"] == ref.name
    ]


def test_an_install_records_one_event_per_module_on_its_inventory() -> None:
    """One Event per module and sync (as Flux records one per reconciliation), not one per object:
    it names what was done to how many objects, then the objects."""
    cluster = InMemoryCluster()

    result = sync(cluster, repo(ModuleRef("widget")))

    created = [c for c in result.outcome.changes if str(c.action) == "created"]
    (event,) = _events(cluster)
    assert len(created) > 3
    assert event["metadata"]["namespace"] == "reconciler-system"
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "inventory-widget",
        "namespace": "reconciler-system",
    }
    assert (event["reason"], event["type"]) == ("Applied", "Normal")
    assert event["message"].startswith(f"module widget 1.0.0: {len(created)} created: ")
    assert "Deployment/widget-system/widget-operator created" in event["message"]
    assert event["source"] == {"component": "reconciler"}


def test_an_event_names_at_most_twelve_objects_and_counts_the_rest() -> None:
    changed = [
        ChangeSetEntry("widget", ObjectRef("v1", "ConfigMap", "ns", f"c{i:02d}"), action)
        for i, action in enumerate([ChangeAction.CREATED] * 14 + [ChangeAction.PRUNED])
    ]

    reason, message = module_event_text("widget", "1.1.0", changed)

    assert reason == "Applied"
    assert message.startswith("module widget 1.1.0: 14 created, 1 pruned: ConfigMap/ns/c00 created")
    assert message.endswith("ConfigMap/ns/c11 created, and 3 more")


def test_an_unchanged_sync_records_nothing_and_a_removal_records_deletions() -> None:
    cluster = InMemoryCluster()
    sync(cluster, repo(ModuleRef("widget"), ModuleRef("gadget")))
    before = len(cluster.events)

    sync(cluster, repo(ModuleRef("widget"), ModuleRef("gadget")))
    unchanged = len(cluster.events)
    sync(cluster, repo(ModuleRef("widget")))

    assert unchanged == before
    (deleted,) = [e for e in _events(cluster) if e["reason"] == "Deleted"]
    assert deleted["involvedObject"]["name"] == "inventory-gadget"
    assert deleted["message"].startswith("module gadget 1.0.0: ")
    assert " deleted: " in deleted["message"]


def test_a_blocked_removal_warns_on_the_users_object_once_however_often_it_is_tried() -> None:
    cluster = InMemoryCluster()
    sync(cluster, repo(ModuleRef("widget"), ModuleRef("gadget")))
    apps = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}
    for body in (apps, USER_GADGET):
        cluster.apply(body, field_manager="kubectl")
    mine = ObjectRef.of(USER_GADGET)

    first = sync(cluster, repo(ModuleRef("widget")))
    sync(cluster, repo(ModuleRef("widget")))

    gadget = next(s for s in first.modules if s.module == "gadget")
    assert gadget.state is ModuleState.DELETING
    assert _about(cluster, mine) == [("DeletionBlocked", "Warning", 2)]  # one Event, counted
    warning = next(e for e in _events(cluster) if e["reason"] == "DeletionBlocked")
    assert warning["metadata"]["namespace"] == "apps"
    assert "module gadget is not removed while this Gadget exists" in warning["message"]


def test_events_can_be_turned_off_and_never_fail_a_sync() -> None:
    quiet = InMemoryCluster()
    failing = InMemoryCluster()
    failing.faults.append(Fault("event", ServerError("events are down"), times=1000))
    config = repo(ModuleRef("widget"))
    off = replace(config, settings=replace(config.settings, kubernetes_events=False))

    done = sync(quiet, off)
    despite = sync(failing, config)

    assert quiet.events == {}
    assert "event" not in quiet.calls
    assert {s.state for s in done.modules} == {s.state for s in despite.modules}
    assert {s.state for s in despite.modules} == {ModuleState.READY}
    assert failing.events == {}


# -- the real adapter ----------------------------------------------------------------------------


_EVENTS = {
    "v1": [
        {
            "name": "events",
            "kind": "Event",
            "namespaced": True,
            "verbs": ["create", "get", "patch", "list"],
        }
    ]
}


class EventServer(JsonServer):
    """Discovery of core/v1 events, and POST (409 when the name exists), GET and PATCH of
    Events, as a kube-apiserver answers them."""

    def __init__(self) -> None:
        self.events: dict[str, dict[str, Any]] = {}
        super().__init__(self.answer)

    def answer(self, method: str, path: str, body: dict[str, Any]) -> Answer:
        if method == "GET":
            found = discovery(path, _EVENTS)
            if found is not None:
                return found
        name = path.rsplit("/", 1)[-1]
        if method == "POST":
            name = body["metadata"]["name"]
            if name in self.events:
                return 409, {"kind": "Status", "code": 409, "reason": "AlreadyExists"}
            self.events[name] = body
            return 201, body
        if name not in self.events:
            return NOT_FOUND
        if method == "PATCH":
            self.events[name] = self.events[name] | body
        return 200, self.events[name]


@pytest.fixture
def apiserver() -> Iterator[EventServer]:
    server = EventServer()
    yield server
    server.close()


def test_the_real_adapter_creates_an_event_then_counts_it_up(
    apiserver: EventServer, tmp_path: Path
) -> None:
    folder = write_kubeconfig(tmp_path, apiserver.url)
    access = Access(ClusterOptions(folder, "ns", cache_dir=tmp_path))
    cluster = access.connect(ClusterAccess(kubeconfig_file="k"), "one")
    assert isinstance(cluster, KubeCluster)
    event = ObjectEvent(OPERATOR, "Configured", "configured by reconciler for module widget")

    cluster.record_event(event, component="reconciler")
    cluster.record_event(event, component="reconciler")

    (stored,) = apiserver.events.values()
    assert stored["metadata"]["namespace"] == "widget-system"
    assert stored["metadata"]["name"].startswith("widget-operator.")
    assert (stored["reason"], stored["count"]) == ("Configured", 2)
    posts = [r for r in apiserver.requests if r.startswith("POST")]
    assert posts == ["POST /api/v1/namespaces/widget-system/events"] * 2
