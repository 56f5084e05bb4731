"""The deletion brake counts the CRDs a chart module drops as it counts a manifest's (S5):
five CRDs a chart stops rendering, by a change of values or by an upgrade, are held by
``sync`` (exit 3, nothing deleted) over a limit of three, shown by ``diff`` and ``sync
--dry-run``, and make ``diff --base`` ask for a second look, as the same change of plain
manifests does. The fleet is synced onto snapshot clusters with a real SQLite store, its
history in a real git repository."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from reconciler.cli import cli
from reconciler.cluster.snapshot import load_snapshot
from tests.support.charts import chart_module_files, templates_with_crds
from tests.support.crds import namespaced_crd
from tests.support.fleet_history import git
from tests.support.repos import (
    API,
    channel_file,
    dump,
    module_files,
    runtime_file,
    write_files,
)

KINDS = [f"Thing{i}" for i in range(5)]
CRDS = [namespaced_crd("example.io", kind) for kind in KINDS]
NAMES = sorted(f"{kind.lower()}s.example.io" for kind in KINDS)
SETTINGS = {
    "apiVersion": API,
    "kind": "Settings",
    "metadata": {"name": "fleet"},
    "spec": {"deletionBrake": {"maxDeletionsPerSync": 3}},
}
TOGGLED = templates_with_crds(CRDS)
DEFAULTS = {"greeting": "hello", "size": "small", "replicas": 1, "crds": True}


class Fleet:
    """A config repo in git, synced onto snapshot clusters with its own store."""

    def __init__(self, root: Path, files: dict[str, str]) -> None:
        self.root = root
        self.repo = write_files(root / "repo", {"reconciler.yaml": dump(SETTINGS), **files})
        git(root, "init", "-q")
        self.commit()
        done = self.run("sync", *self.clusters, "--snapshot-create")
        assert done.exit_code == 0, done.output

    @property
    def clusters(self) -> list[str]:
        return [
            "--snapshot",
            f"{self.root / 'clusters'}/",
            "--state",
            f"sqlite:///{self.root / 'state.db'}",
        ]

    def commit(self) -> None:
        git(self.root, "add", "-A")
        git(
            self.root,
            "-c",
            "user.email=t@example.io",
            "-c",
            "user.name=t",
            "commit",
            "-qm",
            "change",
        )

    def run(self, *args: str) -> Result:
        return CliRunner().invoke(cli, [args[0], str(self.repo), *args[1:]], catch_exceptions=False)

    def crds(self) -> list[str]:
        objects = load_snapshot(self.root / "clusters" / "one.yaml").objects()
        return sorted(
            o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"
        )


def _chart_fleet(root: Path) -> Fleet:
    chart = chart_module_files("web", defaults=DEFAULTS, templates=TOGGLED)
    without = {k.replace("/1.0.0/", "/2.0.0/"): v for k, v in chart.items() if "/1.0.0/" in k}
    without["modules/web/2.0.0/chart/Chart.yaml"] = dump(
        {"apiVersion": "v2", "name": "web", "version": "2.0.0", "appVersion": "2.0.0"}
    )
    without["modules/web/2.0.0/chart/templates/crds.yaml"] = ""
    files = {
        **chart,
        **without,
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("one", "regular", [{"name": "web"}]),
    }
    return Fleet(root, files)


def _no_crds_by_values(fleet: Fleet) -> None:
    entry = [{"name": "web", "values": {"crds": False}}]
    write_files(fleet.repo, runtime_file("one", "regular", entry))


def _no_crds_by_upgrade(fleet: Fleet) -> None:
    write_files(fleet.repo, channel_file("regular", {"web": "2.0.0"}))


@pytest.mark.parametrize("change", [_no_crds_by_values, _no_crds_by_upgrade])
def test_crds_a_chart_drops_are_held_by_the_brake(tmp_path: Path, change: object) -> None:
    fleet = _chart_fleet(tmp_path)
    assert fleet.crds() == NAMES
    assert callable(change)
    change(fleet)

    planned = fleet.run("diff", *fleet.clusters)
    held = fleet.run("sync", *fleet.clusters)

    expected = "deletion brake: held: 5 deletion(s), limit 3: " + ", ".join(
        f"CRD one/web/{name}" for name in NAMES
    )
    assert planned.exit_code == 3, planned.output
    assert expected in planned.output
    assert held.exit_code == 3, held.output
    assert expected in held.output
    assert fleet.crds() == NAMES  # nothing deleted
    allowed = fleet.run("sync", *fleet.clusters, "--allow-deletions", "5")
    assert allowed.exit_code == 0, allowed.output
    assert fleet.crds() == []


def test_diff_base_asks_a_second_look_for_crds_a_chart_drops_as_for_a_manifests(
    tmp_path: Path,
) -> None:
    chart = _chart_fleet(tmp_path / "chart")
    _no_crds_by_values(chart)
    plain = Fleet(
        tmp_path / "plain",
        {
            **module_files("web", ("1.0.0",), objects=CRDS),
            **module_files("web", ("2.0.0",)),
            **channel_file("regular", {"web": "1.0.0"}),
            **runtime_file("one", "regular", [{"name": "web"}]),
        },
    )
    write_files(plain.repo, channel_file("regular", {"web": "2.0.0"}))

    for fleet in (chart, plain):
        shown = fleet.run("diff", "--base", "HEAD", "-o", "json")
        assert shown.exit_code == 3, shown.output
        report = yaml.safe_load(shown.stdout)
        assert report["needsSecondLook"] is True
        (module,) = report["runtimes"][0]["modules"]
        deleted = [c["subject"] for c in module["changes"] if c["action"] == "delete"]
        assert sorted(deleted) == [f"CustomResourceDefinition/{n}" for n in NAMES]
