"""A failed upgrade rolled back through ``reconciler sync`` on a real API server (L15): 2.0.0 is
applied and its operator never becomes available (no kubelet runs here; a server-side dry-run
cannot foresee that). The status says 1.0.0 runs and 2.0.0 is not Ready; the inventory keeps
1.0.0 as the version last Ready; git going back to 1.0.0 is a rollback (``diff`` says so), not
a downgrade, and restores 1.0.0 whole: the ConfigMap only 1.0.0 ships is back, the one only
2.0.0 ships is pruned, the operator is 1.0.0 again. Once 2.0.0 does become Ready, going back is
a downgrade again (L5)."""

from __future__ import annotations

import json

from tests.support.e2e_harness import reconciler
from tests.support.e2e_world import World
from tests.support.sample_fleet import check_document


def _inventory(world: World, module: str) -> dict[str, object]:
    body = world.kube.config_map(world.fleet.system_namespace, f"inventory-{module}")
    assert body is not None
    data: dict[str, object] = json.loads(body["data"]["inventory.json"])
    return data


def test_an_upgrade_whose_operator_never_becomes_available_is_rolled_back(world: World) -> None:
    fleet, kube = world.fleet, world.kube
    app = fleet.module("app", versions=("1.0.0", "2.0.0"))
    fleet.channel[app.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": app.name}])
    assert world.sync().exit_code == 0
    kube.make_available(app.namespace, app.operator)
    assert world.sync().exit_code == 0
    assert world.status(runtime)[app.name]["state"] == "Ready"
    assert _inventory(world, app.name)["readyVersion"] == "1.0.0"

    # 2.0.0 is applied; its operator never becomes available
    fleet.channel[app.name] = "2.0.0"
    for _ in range(2):
        assert world.sync().exit_code == 0
        status = world.status(runtime)[app.name]
        assert (status["state"], status["reason"]) == ("Processing", "WaitingForOperator")
        assert status["message"].startswith("1.0.0 runs; upgrading to 2.0.0: "), status
        assert (status["readyVersion"], status["targetVersion"]) == ("1.0.0", "2.0.0")
    check_document(world.reconciler_json("status"), "RuntimeStatusList")
    operator = kube.deployment(app.namespace, app.operator)
    assert operator is not None
    assert operator["metadata"]["labels"]["app.kubernetes.io/version"] == "2.0.0"
    assert kube.config_map(app.namespace, app.config_map("1.0.0")) is None
    inventory = _inventory(world, app.name)
    assert (inventory["version"], inventory["readyVersion"]) == ("2.0.0", "1.0.0")

    # back to 1.0.0 in git: a rollback
    fleet.channel[app.name] = "1.0.0"
    repo = fleet.write()
    diff = reconciler("diff", repo, "--runtime", runtime, *world.cluster_flags(), env=world.env)
    assert diff.exit_code == 1, diff.output
    assert "[Rollback]" in diff.output
    assert "DowngradeNotSupported" not in diff.output
    back = world.sync()
    assert back.exit_code == 0, back.output
    status = world.status(runtime)[app.name]
    assert status["reason"] != "DowngradeNotSupported", status
    operator = kube.deployment(app.namespace, app.operator)
    assert operator is not None
    assert operator["metadata"]["labels"]["app.kubernetes.io/version"] == "1.0.0"
    image = operator["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.endswith(":1.0.0")
    settings = kube.config_map(app.namespace, app.config_map("1.0.0"))
    assert settings is not None
    assert settings["data"] == {"version": "1.0.0"}
    assert kube.config_map(app.namespace, app.config_map("2.0.0")) is None
    kube.make_available(app.namespace, app.operator)
    assert world.sync().exit_code == 0
    status = world.status(runtime)[app.name]
    assert (status["state"], status["version"]) == ("Ready", "1.0.0")
    assert "targetVersion" not in status
    inventory = _inventory(world, app.name)
    assert (inventory["version"], inventory["readyVersion"]) == ("1.0.0", "1.0.0")

    # 2.0.0 becomes Ready: going back is a downgrade again (L5)
    fleet.channel[app.name] = "2.0.0"
    assert world.sync().exit_code == 0
    kube.make_available(app.namespace, app.operator)
    assert world.sync().exit_code == 0
    assert world.status(runtime)[app.name]["state"] == "Ready"
    fleet.channel[app.name] = "1.0.0"
    assert world.sync().exit_code == 0
    status = world.status(runtime)[app.name]
    assert (status["state"], status["reason"]) == ("Warning", "DowngradeNotSupported")
