"""`reconciler diff` and `reconciler sync` from the command line, on recorded snapshots.

A snapshot folder stands in for the clusters (one `<runtime>.yaml` each); `sync` writes the
result back, so a test can go install -> no change -> channel bump -> upgrade like a user would.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from reconciler.cli import cli
from reconciler.core.fielddiff import MASK, field_diff

ROOT = Path(__file__).parents[2]


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """A copy of the sample repo with its channels beside it, as in the project."""
    shutil.copytree(ROOT / "sample-repo", tmp_path / "fleet")
    shutil.copytree(ROOT / "channels", tmp_path / "channels")
    (tmp_path / "clusters").mkdir()
    return tmp_path / "fleet"


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _clusters(fleet: Path) -> str:
    return str(fleet.parent / "clusters")


def test_install_then_nothing_to_do(fleet: Path) -> None:
    first = _run("diff", str(fleet), "--runtime", "prod-eu-1", "--snapshot", _clusters(fleet))
    assert first.exit_code == 1
    assert "+ istio            install 1.0.0 [Install]" in first.stdout
    assert "+ Deployment/kyma-system/istio-controller-manager" in first.stdout

    synced = _run("sync", str(fleet), "--runtime", "prod-eu-1", "--snapshot", _clusters(fleet))
    assert synced.exit_code == 0, synced.output
    assert "runtime prod-eu-1: provision" in synced.stdout
    assert " succeeded: 4 installed\n" in synced.stdout  # what was done, not "succeeded" again
    assert (fleet.parent / "clusters" / "prod-eu-1.yaml").is_file()

    again = _run("diff", str(fleet), "--runtime", "prod-eu-1", "--snapshot", _clusters(fleet))
    assert again.exit_code == 0
    assert "runtime prod-eu-1: 4 modules, 0 to change" in again.stdout

    resynced = _run("sync", str(fleet), "--runtime", "prod-eu-1", "--snapshot", _clusters(fleet))
    assert " succeeded: no change\n" in resynced.stdout
    listed = _run("operations", "list", "--runtime", "prod-eu-1").stdout.splitlines()
    rows = [line.split() for line in listed[1:]]  # ID RUNTIME TYPE STATE CREATED MESSAGE
    assert [(row[3], " ".join(row[6:])) for row in rows] == [
        ("succeeded", "no change"),  # not "succeeded" twice
        ("succeeded", "4 installed"),
    ]


def test_channel_bump_shows_the_upgrade_with_field_diffs(fleet: Path) -> None:
    _run("sync", str(fleet), "--runtime", "prod-eu-1", "--snapshot", _clusters(fleet))
    channel = fleet.parent / "channels" / "regular.yaml"
    channel.write_text(channel.read_text().replace("serverless: 1.1.0", "serverless: 1.2.0"))

    result = _run("diff", str(fleet), "--runtime", "prod-eu-1", "--snapshot", _clusters(fleet))

    assert result.exit_code == 1
    assert "^ serverless       upgrade 1.1.0 -> 1.2.0 [Upgrade]" in result.stdout
    assert "spec.template.spec.containers[manager].image:" in result.stdout
    assert "- ConfigMap/kyma-system/serverless-operator-config" in result.stdout  # pruned

    report = json.loads(
        _run(
            "diff",
            str(fleet),
            "--runtime",
            "prod-eu-1",
            "--snapshot",
            _clusters(fleet),
            "--format",
            "json",
        ).stdout
    )
    serverless = next(m for m in report["runtimes"][0]["modules"] if m["module"] == "serverless")
    assert (serverless["action"], serverless["fromVersion"], serverless["toVersion"]) == (
        "upgrade",
        "1.1.0",
        "1.2.0",
    )
    assert report["hasChanges"] is True


def test_every_runtime_by_default_and_suspended_ones_untouched(fleet: Path) -> None:
    """Slow by nature (about 3 s on an idle machine, twice that on a loaded one): one sync of the
    whole sample fleet, five runtimes provisioned onto snapshot files saved after every change."""
    result = _run("sync", str(fleet), "--snapshot", _clusters(fleet))

    assert result.exit_code == 0, result.output
    assert "runtime prod-ap-1: provision" in result.stdout
    written = sorted(p.stem for p in (fleet.parent / "clusters").glob("*.yaml"))
    assert written == [
        "control-plane",
        "dev-sandbox",
        "prod-ap-1",
        "prod-eu-1",
        "prod-us-1",
        "staging-eu",
    ]
    assert "Deployment" not in (fleet.parent / "clusters" / "prod-ap-1.yaml").read_text()


def test_dry_run_writes_nothing(fleet: Path) -> None:
    result = _run(
        "sync", str(fleet), "--runtime", "prod-eu-1", "--dry-run", "--snapshot", _clusters(fleet)
    )

    assert result.exit_code == 0
    assert "install" in result.stdout
    assert not (fleet.parent / "clusters" / "prod-eu-1.yaml").exists()


def test_usage_and_access_errors_exit_2(fleet: Path, tmp_path: Path) -> None:
    one_file = str(tmp_path / "one.yaml")
    assert _run("diff", str(fleet), "--snapshot", one_file).exit_code == 2  # several runtimes
    assert _run("diff", str(fleet), "--runtime", "nope", "--snapshot", one_file).exit_code == 2

    no_dir = _run(
        "diff", str(fleet), "--runtime", "staging-eu"
    )  # kubeconfigFile, no --kubeconfig-dir
    assert no_dir.exit_code == 2
    assert (
        "staging-eu: error: kubeconfig file staging-eu.yaml needs --kubeconfig-dir" in no_dir.stderr
    )

    (tmp_path / "bad.yaml").write_text("- just a list\n")
    bad = _run(
        "diff", str(fleet), "--runtime", "prod-eu-1", "--snapshot", str(tmp_path / "bad.yaml")
    )
    assert bad.exit_code == 2
    assert "not a snapshot of Kubernetes objects" in bad.stderr


def test_an_invalid_repo_plans_nothing(tmp_path: Path) -> None:
    result = _run(
        "diff",
        str(ROOT / "tests" / "support" / "fixtures" / "broken-repo"),
        "--snapshot",
        str(tmp_path),
    )

    assert result.exit_code == 1
    assert "C2 channel 'fsat' does not exist" in result.stderr
    assert result.stdout == ""


def test_secret_values_are_masked_in_field_diffs() -> None:
    desired = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "data": {"k": "bmV3"},
    }
    live = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "b2xk"}}

    changes = field_diff(desired, live)

    assert [(c.path, c.old, c.new) for c in changes] == [("data.k", MASK, MASK)]
    assert "bmV3" not in changes[0].format()


def test_a_new_snapshot_folder_is_named_with_a_trailing_slash(fleet: Path, tmp_path: Path) -> None:
    folder = tmp_path / "new-clusters"

    result = _run(
        "sync",
        str(fleet),
        "--runtime",
        "prod-eu-1",
        "--runtime",
        "dev-sandbox",
        "--snapshot",
        f"{folder}/",
        "--snapshot-create",
    )

    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in folder.iterdir()) == ["dev-sandbox.yaml", "prod-eu-1.yaml"]


@pytest.mark.parametrize(
    "command",
    [
        ["diff"],
        ["sync", "--dry-run"],
        ["sync"],
        ["reconcile", "prod-eu-1"],
        ["tree", "prod-eu-1"],
        ["check"],
    ],
)
def test_a_mistyped_snapshot_is_refused_and_creates_nothing(
    fleet: Path, tmp_path: Path, command: list[str]
) -> None:
    """``--snapshot clusterz/`` (a typo of ``clusters/``) is refused, not read as empty clusters (a
    diff that plans to install everything and a state store written into a new folder)."""
    before = sorted(p.name for p in tmp_path.iterdir())
    verb, *rest = command
    args = (
        [verb, *rest[:1], str(fleet), *rest[1:]]
        if verb in ("reconcile", "tree")
        else [
            verb,
            str(fleet),
            *rest,
        ]
    )

    result = _run(*args, "--snapshot", f"{tmp_path / 'clusterz'}/")

    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [
        f"error: --snapshot {tmp_path / 'clusterz'}/: no such file or folder; did you mean "
        "'clusters'? (to rehearse on empty clusters, create it with sync --snapshot-create)"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_read_only_commands_create_no_state_store(fleet: Path, tmp_path: Path) -> None:
    """diff and sync --dry-run plan against recorded clusters without a store (an empty one in
    memory); nothing is written beside the snapshot."""
    clusters = _clusters(fleet) + "/"
    planned = [
        _run("diff", str(fleet), "--snapshot", clusters),
        _run("sync", str(fleet), "--dry-run", "--snapshot", clusters),
        _run(
            "sync",
            str(fleet),
            "--dry-run",
            "--snapshot",
            f"{tmp_path / 'new'}/",
            "--snapshot-create",
        ),
    ]

    assert [r.exit_code for r in planned] == [1, 0, 0], [r.output for r in planned]
    assert "+ istio            install 1.0.0 [Install]" in planned[2].stdout
    assert list((tmp_path / "clusters").iterdir()) == []
    assert not (tmp_path / "new").exists()


def test_a_snapshot_of_another_runtime_is_refused_naming_the_file_and_its_runtime(
    fleet: Path,
) -> None:
    clusters = Path(_clusters(fleet))
    assert (
        _run("sync", str(fleet), "--runtime", "prod-eu-1", "--snapshot", f"{clusters}/").exit_code
        == 0
    )
    recorded = clusters / "prod-eu-1.yaml"
    shutil.copy(recorded, clusters / "prod-us-1.yaml")  # a file copied under another name

    for snapshot in (str(recorded), f"{clusters}/"):
        for command in (["diff"], ["sync"]):
            result = _run(*command, str(fleet), "--runtime", "prod-us-1", "--snapshot", snapshot)

            # diff refuses (2); sync fails the step that connects (1), as for an unreadable file
            assert result.exit_code == (2 if command == ["diff"] else 1), result.output
            shown = str(
                clusters / "prod-eu-1.yaml"
                if snapshot == str(recorded)
                else clusters / "prod-us-1.yaml"
            )
            assert (
                f"{shown}: a snapshot of runtime prod-eu-1 (its inventories name it), not of "
                "prod-us-1" in result.output
            )
    assert "prod-us-1" not in (clusters / "prod-us-1.yaml").read_text()  # nothing written

    assert (
        _run("diff", str(fleet), "--runtime", "prod-eu-1", "--snapshot", str(recorded)).exit_code
        == 0
    )
