"""Fields removed from a manifest are changes: the fields our field manager owns on the live object
(``metadata.managedFields``) are compared with the desired object, so a field we applied before and
no longer want shows in ``diff`` and ``sync`` removes it (server-side apply drops a field its
manager stopped applying). Offline snapshots keep the managed fields."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from reconciler.cli import cli
from reconciler.cluster.memory import InMemoryCluster
from reconciler.cluster.snapshot import load_snapshot
from reconciler.core.fielddiff import MASK, removed_owned_fields
from reconciler.core.model import FIELD_MANAGER
from reconciler.core.objects import ObjectRef

ROOT = Path(__file__).parents[2]
MANIFEST = Path("modules/istio/1.0.0/manifest.yaml")
FIELD = "      terminationGracePeriodSeconds: 10\n"
DEPLOYMENT = ObjectRef("apps/v1", "Deployment", "kyma-system", "istio-controller-manager")


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _pod_spec(clusters: Path) -> dict[str, Any]:
    for body in load_snapshot(clusters / "prod-eu-1.yaml").objects():
        if ObjectRef.of(body) == DEPLOYMENT:
            spec: dict[str, Any] = body["spec"]["template"]["spec"]
            return spec
    raise AssertionError("no operator Deployment in the snapshot")


def test_a_field_removed_from_a_manifest_shows_in_diff_and_sync_removes_it(
    tmp_path: Path,
) -> None:
    fleet, clusters = tmp_path / "fleet", tmp_path / "clusters"
    shutil.copytree(ROOT / "sample-repo", fleet)
    shutil.copytree(ROOT / "channels", tmp_path / "channels")
    clusters.mkdir()
    where = ("--runtime", "prod-eu-1", "--snapshot", f"{clusters}/")
    assert _run("sync", str(fleet), *where).exit_code == 0
    assert _pod_spec(clusters)["terminationGracePeriodSeconds"] == 10

    manifest = fleet / MANIFEST
    assert FIELD in manifest.read_text()
    manifest.write_text(manifest.read_text().replace(FIELD, ""))

    diff = _run("diff", str(fleet), *where)
    assert diff.exit_code == 1, diff.output
    assert "Deployment/kyma-system/istio-controller-manager" in diff.stdout
    assert "spec.template.spec.terminationGracePeriodSeconds: 10 -> (none)" in diff.stdout

    assert _run("sync", str(fleet), *where).exit_code == 0
    assert "terminationGracePeriodSeconds" not in _pod_spec(clusters)
    again = _run("diff", str(fleet), *where)
    assert again.exit_code == 0, again.output


def _applied(cluster: InMemoryCluster, body: dict[str, Any]) -> dict[str, Any]:
    return cluster.apply(body, field_manager=FIELD_MANAGER)


def test_only_the_fields_our_manager_owns_count() -> None:
    cluster = InMemoryCluster()
    cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}, field_manager="x"
    )
    ours = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}}
    _applied(cluster, {**ours, "data": {"a": "1", "b": "2"}})
    live = cluster.apply({**ours, "data": {"c": "3"}}, field_manager="someone-else")

    removed = removed_owned_fields({**ours, "data": {"a": "1"}}, live, FIELD_MANAGER)

    assert [(c.path, c.old, c.new) for c in removed] == [("data.b", "2", None)]
    assert removed_owned_fields({**ours, "data": {"a": "1", "b": "2"}}, live, FIELD_MANAGER) == ()
    assert removed_owned_fields(ours, None, FIELD_MANAGER) == ()


def test_keyed_list_items_as_a_real_server_records_them() -> None:
    """A real API server records list items by key (``k:``) and by value (``v:``)."""
    live = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "d",
            "managedFields": [
                {
                    "manager": FIELD_MANAGER,
                    "operation": "Apply",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:spec": {
                            "f:template": {
                                "f:spec": {
                                    "f:containers": {
                                        'k:{"name":"m"}': {
                                            ".": {},
                                            "f:name": {},
                                            "f:args": {},
                                            "f:resources": {"f:limits": {"f:cpu": {}}},
                                        },
                                        'k:{"name":"sidecar"}': {".": {}, "f:name": {}},
                                    },
                                }
                            }
                        },
                        "f:metadata": {"f:finalizers": {'v:"example.io/x"': {}}},
                    },
                }
            ],
            "finalizers": ["example.io/x"],
        },
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "m", "args": ["-v"], "resources": {"limits": {"cpu": "1"}}},
                        {"name": "sidecar"},
                    ]
                }
            }
        },
    }
    desired = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"template": {"spec": {"containers": [{"name": "m", "args": ["-v"]}]}}},
    }

    paths = {c.path for c in removed_owned_fields(desired, live, FIELD_MANAGER)}

    assert paths == {
        "spec.template.spec.containers[m].resources",
        "spec.template.spec.containers[sidecar]",
        "metadata.finalizers",
    }


def test_a_removed_secret_value_stays_masked() -> None:
    cluster = InMemoryCluster()
    cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}, field_manager="x"
    )
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n"}}
    live = _applied(cluster, {**secret, "data": {"token": "c2VjcmV0"}})

    (change,) = removed_owned_fields({**secret, "data": {}}, live, FIELD_MANAGER)

    assert (change.path, change.old, change.new) == ("data.token", MASK, MASK)
