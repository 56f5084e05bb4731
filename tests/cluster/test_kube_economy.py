"""API economy on the real API server, counted from its audit log: a cold install of 30 modules (210
objects, CRDs and default configurations included) runs to Ready in one ``reconciler sync`` with
about one write per object, and a sync that changes nothing makes no write and at most one call per
kind and two more.

The fleet is tests/support/economy_fleet.py's, with names of this test's own; the Deployments are
made available as they appear (tests/support/kube_workloads.py), and that stand-in's requests are
left out of the counts (bench/kube_bench.py counts the same way).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.kube import KubeCluster, k8s_config
from reconciler.core.objects import ObjectRef
from tests.support.economy_fleet import (
    OBJECTS_PER_MODULE,
    SHARED_KINDS,
    economy_files,
    module_names,
)
from tests.support.kube_audit import Calls, audit_calls
from tests.support.kube_control_plane import ControlPlane
from tests.support.kube_workloads import deployments_made_available
from tests.support.repos import write_files

MODULES = 30


class _Fleet:
    def __init__(self, plane: ControlPlane, root: Path) -> None:
        self.plane, self.root = plane, root
        self.prefix = f"x{uuid.uuid4().hex[:5]}"
        self.runtime = f"{self.prefix}-rt"
        self.system_namespace = f"{self.prefix}-rs"
        cluster = {"kubeconfigFile": plane.kubeconfig_name}
        files = economy_files(
            MODULES,
            runtime=self.runtime,
            prefix=self.prefix,
            cluster=cluster,
            system_namespace=self.system_namespace,
        )
        write_files(root / "repo", files)

    def sync(self) -> tuple[str, Calls]:
        mark = self.plane.audit_mark()
        args = ["sync", str(self.root / "repo"), "--runtime", self.runtime, "--wait", "60"]
        args += ["--kubeconfig-dir", str(self.plane.kubeconfig_dir)]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        return result.output, audit_calls(self.plane.audit_events(mark))

    def cleanup(self) -> None:
        api_client = k8s_config.new_client_from_config(config_file=str(self.plane.kubeconfig))
        cluster = KubeCluster(api_client, name="cleanup")
        for index, name in enumerate(module_names(MODULES, self.prefix)):
            crd = f"thing{index:03d}s.{name}.example.com"
            for ref in (
                ObjectRef("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", crd),
                ObjectRef("v1", "Namespace", "", f"{name}-system"),
            ):
                cluster.delete(ref)
        cluster.delete(ObjectRef("v1", "Namespace", "", self.system_namespace))


@pytest.fixture
def fleet(
    kube_control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[_Fleet]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the discovery cache file
    made = _Fleet(kube_control_plane, tmp_path)
    try:
        with deployments_made_available(kube_control_plane.kubeconfig):
            yield made
    finally:
        made.cleanup()


def test_a_cold_install_writes_once_per_object_and_a_no_change_sync_only_lists(
    fleet: _Fleet,
) -> None:
    objects = MODULES * OBJECTS_PER_MODULE

    output, cold = fleet.sync()
    _, again = fleet.sync()

    print(f"\ncold install of {objects} objects: {cold.text()}\nno change: {again.text()}")
    assert "succeeded" in output, output  # to Ready in one sync: it runs again for CRDs
    assert output.count(" Ready ") == MODULES, output
    # Each object once; per module its inventory twice (the intent before any object, then
    # with the default configuration recorded as created, which L3 needs), a third time when
    # the module became Ready in a later run of the sync than the one that applied it (a pass
    # never waits: L15 records the version it became Ready at then), and one Event; the
    # system namespace once. Was 271 applies and 210 Events.
    assert cold.writes <= objects + 4 * MODULES + 1, cold.text()
    assert cold.events == MODULES, cold.text()
    # L14: what the plan writes is dry-run first, once per object; nothing when nothing changes
    assert cold.dry_runs <= objects, cold.text()
    assert again.writes == again.dry_runs == 0, again.text()
    assert again.calls <= SHARED_KINDS + MODULES + 2, again.text()
