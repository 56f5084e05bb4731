"""The world of one end-to-end test (:class:`World`): the session's real control plane, the
test's own kubectl, a config repo whose names carry a suffix of the test's own, a discovery cache
as a user's machine keeps it, the command line on them, and the cleanup of every namespace and CRD
it made. :func:`world_of` makes it (the fixture ``world`` in ``tests/e2e/conftest.py``, and the
process tests on the real server)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import Result

from tests.support.e2e_harness import (
    Fleet,
    Kube,
    TestModule,
    json_of,
    modules_of,
    reconciler,
    until,
)
from tests.support.kube_control_plane import ControlPlane


@dataclass
class World:
    """One test's control plane, kubectl, config repo and command line."""

    control_plane: ControlPlane
    kube: Kube
    fleet: Fleet
    home: Path

    @property
    def env(self) -> dict[str, str]:
        """The environment of the test's commands: a cache of its own (discovery, as kept
        between runs on a user's machine)."""
        return {"XDG_CACHE_HOME": str(self.home / "cache")}

    def cluster_flags(self) -> list[str]:
        return ["--kubeconfig-dir", str(self.control_plane.kubeconfig_dir)]

    def sync(self, *args: str) -> Result:
        """``reconciler sync REPO --kubeconfig-dir DIR ARGS`` on the repo as written now."""
        repo = self.fleet.write()
        return reconciler("sync", repo, *self.cluster_flags(), *args, env=self.env)

    def install(self, module: TestModule, runtime: str) -> None:
        """Sync until ``module`` is Ready on ``runtime``, its operator made available between
        syncs (no kubelet runs); fail after 5 syncs."""
        for _ in range(5):
            result = self.sync()
            assert result.exit_code == 0, result.output
            if self.kube.deployment(module.namespace, module.operator) is not None:
                self.kube.make_available(module.namespace, module.operator)
            if self.status(runtime).get(module.name, {}).get("state") == "Ready":
                return
        raise AssertionError(f"{module.name} not Ready after 5 syncs: {self.status(runtime)}")

    def sync_until_removed(self, runtime: str) -> None:
        """``sync --allow-deletions RUNTIME`` until no module of ``runtime`` has a state left:
        each sync bounds its wait for the server to delete CRDs (10 s), which a loaded server
        can take longer to do; every sync must exit 0."""

        def removed() -> bool:
            ran = self.sync("--allow-deletions", runtime)
            assert ran.exit_code == 0, ran.output
            return all(m["state"] is None for m in self.status(runtime).values())

        until(removed, f"the modules of {runtime} removed")

    def reconciler_json(self, *args: str) -> dict[str, Any]:
        """``reconciler ARGS -o json`` on the test's state store: the document it printed."""
        result = reconciler(*args, "-o", "json", env=self.env)
        assert result.exit_code == 0, result.output
        return json_of(result)

    def status(self, runtime: str) -> dict[str, dict[str, Any]]:
        """``reconciler status -o json``: the modules of ``runtime`` by name."""
        result = reconciler("status", "-o", "json", env=self.env)
        assert result.exit_code == 0, result.output
        return modules_of(json_of(result), runtime)

    def runtime_status(self, runtime: str) -> dict[str, Any]:
        result = reconciler("status", "-o", "json", env=self.env)
        assert result.exit_code == 0, result.output
        for item in json_of(result)["items"]:
            if item["runtime"] == runtime:
                found: dict[str, Any] = item
                return found
        raise AssertionError(f"no runtime {runtime} in the status")

    def cleanup(self) -> None:
        for module in self.fleet.modules.values():
            self.kube.delete_namespace(module.namespace)
            self.kube.delete_crd(module.crd.name)
        self.kube.delete_namespace(self.fleet.system_namespace)


def world_of(control_plane: ControlPlane, root: Path) -> Iterator[World]:
    """A :class:`World` of a suffix of its own in ``root``, cleaned up after (its kubectl
    closed)."""
    kube = Kube(control_plane.kubeconfig)
    world = World(control_plane, kube, Fleet(root / "repo", uuid.uuid4().hex[:6]), root)
    try:
        yield world
    finally:
        try:
            world.cleanup()
        finally:
            kube.close()
