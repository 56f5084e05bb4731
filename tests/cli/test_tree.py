"""``reconciler tree RUNTIME``: each module's inventory objects with their live state, read with one
list per kind and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.live import live_state
from reconciler.lifecycle.executor import Lifecycle, sync_runtime
from tests.support.big_runtime import MODULES, NOW, big_runtime_repo
from tests.support.repos import RepoFactory
from tests.support.sample_fleet import Fleet, check_document


def _fleet(tmp_path: Path) -> Fleet:
    made = Fleet(tmp_path)
    clusters = f"{made.clusters}/"
    made.run("sync", str(made.repo), "--runtime", "prod-eu-1", "--snapshot", clusters, *made.state)
    return made


def test_tree_shows_each_module_and_the_live_state_of_its_objects(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path)
    snapshot = fleet.clusters / "prod-eu-1.yaml"
    listed = json.loads(snapshot.read_text())  # a v1 List, as kubectl get -o json prints
    kept = [o for o in listed["items"] if o["metadata"]["name"] != "serverless-operator-metrics"]
    snapshot.write_text(json.dumps({**listed, "items": kept}))  # someone deleted a Service

    text = fleet.run("tree", "prod-eu-1", str(fleet.repo), "--snapshot", f"{fleet.clusters}/")

    lines = text.splitlines()
    assert lines[0] == f"runtime prod-eu-1 (snapshot {snapshot.resolve()})"
    modules = [line.split()[1:3] for line in lines if line[:1] in "├└"]
    assert modules == [
        ["api-gateway", "1.0.0"],
        ["istio", "1.0.0"],
        ["serverless", "1.1.0"],
        ["telemetry", "1.0.0"],
    ]
    objects_lines = [line.split("── ", 1)[1].split() for line in lines if line[:1] in "│ "]
    states = {cells[0]: cells[1] for cells in objects_lines}
    assert states["CustomResourceDefinition/serverlesses.operator.kyma-project.io"] == "Established"
    assert states["Deployment/kyma-system/serverless-operator"] == "Available"
    assert states["Service/kyma-system/serverless-operator-metrics"] == "Missing"
    assert states["Serverless/kyma-system/default"] == "Present"
    default = next(line for line in lines if "Serverless/kyma-system/default" in line)
    assert default.endswith("Present  (default configuration)")


def test_tree_of_one_module_as_json(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path)
    where = ["--snapshot", f"{fleet.clusters}/"]

    document = fleet.document("tree", "prod-eu-1", str(fleet.repo), "--module", "istio", *where)
    unknown = fleet.run("tree", "prod-eu-1", str(fleet.repo), "--module", "keda", *where, code=2)
    never = fleet.run("tree", "prod-us-1", str(fleet.repo), *where)

    check_document(document, "ObjectTree")
    assert [m["module"] for m in document["modules"]] == ["istio"]
    assert {o["state"] for o in document["modules"][0]["objects"]} <= {
        "Established",
        "Present",
        "Available",
    }
    assert unknown == ""
    assert never.splitlines()[1] == "└── no module recorded in its cluster"


def test_tree_reads_one_list_per_kind_and_writes_nothing(make_repo: RepoFactory) -> None:
    repo = big_runtime_repo(make_repo)
    cluster = InMemoryCluster()
    sync_runtime(cluster, repo, "big", now=NOW)
    before = dict(cluster.calls)

    branches = Lifecycle(cluster, system_namespace="reconciler-system").inventory_tree("big")

    calls = {k: v - before.get(k, 0) for k, v in cluster.calls.items() if v != before.get(k, 0)}
    assert len(branches) == MODULES
    assert all(
        live_state(body) != "Missing" for _, objects in branches for body in objects.values()
    )
    assert calls == {"list": 5 + 1 + MODULES + 1}  # 6 kinds, a CR kind per module, inventories


def test_a_mistyped_runtime_is_one_line_with_the_closest_name(tmp_path: Path) -> None:
    """Named as mistyped, with the closest name, not "no record of how to reach its cluster"."""
    fleet = _fleet(tmp_path)

    where = ["--snapshot", f"{fleet.clusters}/", *fleet.state]
    result = CliRunner().invoke(cli, ["tree", "prod-eu1", str(fleet.repo), *where])

    assert result.exit_code == 2
    assert result.output.strip() == (
        "error: runtime 'prod-eu1' is not in the config repo nor in the state store; "
        "did you mean 'prod-eu-1'?"
    )
