"""The documents commands print with ``-o json`` / ``-o yaml``: each carries ``apiVersion:
reconciler.dev/v1`` and its ``kind``, and validates against its schema in
``schemas/output/output.schema.json``, which ``docs/json-output.md`` documents kind by kind.

Every command runs for real on a copy of the sample fleet, against snapshot clusters and a
SQLite state store in a temporary folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reconciler.daemon.service import Daemon
from reconciler.operations.store import SqliteStore
from tests.support.sample_fleet import ROOT, SCHEMA, Fleet, check_document
from tests.support.sources import UnusedSource

KINDS = sorted(name for name in SCHEMA["$defs"] if name[0].isupper())
PAGE = (ROOT / "docs" / "json-output.md").read_text()


@pytest.fixture
def fleet(tmp_path: Path) -> Fleet:
    return Fleet(tmp_path)


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_validate_prints_the_same_keys_valid_or_not(fleet: Fleet, output: str) -> None:
    valid = fleet.document("validate", str(fleet.repo), output=output)
    broken = ROOT / "tests" / "support" / "fixtures" / "broken-repo"
    invalid = fleet.document("validate", str(broken), code=1, output=output)

    check_document(valid, "Validation")
    check_document(invalid, "Validation")
    assert valid.keys() == invalid.keys()
    assert valid["valid"]
    assert not invalid["valid"]
    assert invalid["errors"]


def test_a_live_diff_and_a_dry_run_sync(fleet: Fleet) -> None:
    where = ["--snapshot", f"{fleet.clusters}/", *fleet.state]

    live = fleet.document("diff", str(fleet.repo), *where, code=1)
    dry = fleet.document("sync", str(fleet.repo), "--dry-run", *where)

    check_document(live, "LiveDiff")
    check_document(dry, "SyncPlan")
    changes = [c for r in live["runtimes"] for m in r["modules"] for c in m["changes"]]
    assert changes  # the object changes are covered by the schema too
    assert [r["runtime"] for r in dry["runtimes"]] == [r["runtime"] for r in live["runtimes"]]


def test_sync_status_and_operations(fleet: Fleet) -> None:
    report = fleet.document(
        "sync", str(fleet.repo), "--snapshot", f"{fleet.clusters}/", *fleet.state
    )
    status = fleet.document("status", *fleet.state)
    listed = fleet.document("operations", "list", *fleet.state)
    shown = fleet.document("operations", "show", listed["items"][0]["id"], *fleet.state)
    as_yaml = fleet.document("status", *fleet.state, output="yaml")

    check_document(report, "SyncReport")
    check_document(status, "RuntimeStatusList")
    check_document(listed, "OperationList")
    check_document(shown, "Operation")
    assert len(status["items"]) == len(report["operations"]) == 6
    assert as_yaml == status


def test_a_fleet_diff(fleet: Fleet) -> None:
    base = fleet.root / "base"
    shutil.copytree(fleet.repo, base / "sample-repo")
    shutil.copytree(fleet.root / "channels", base / "channels")
    regular = fleet.root / "channels" / "regular.yaml"
    regular.write_text(regular.read_text().replace("serverless: 1.1.0", "serverless: 1.2.0"))

    document = fleet.document(
        "diff", str(fleet.repo), "--base-path", str(base / "sample-repo"), "--details", code=3
    )

    check_document(document, "FleetDiff")
    assert document["summary"][0]["module"] == "serverless"


def test_the_daemons_status(fleet: Fleet) -> None:
    fleet.synced()
    store = SqliteStore(fleet.root / "state.db")
    daemon = Daemon(UnusedSource(), store, lambda access, name: None, lambda: None)  # type: ignore[arg-type,return-value]
    try:
        document = daemon.status()
    finally:
        daemon.close()

    check_document(document, "DaemonStatus")
    assert len(document["runtimes"]) == 6


def test_every_kind_is_documented_with_its_fields() -> None:
    for kind in KINDS:
        assert f"### `{kind}`" in PAGE, kind
        for field in SCHEMA["$defs"][kind]["properties"]:
            assert f"`{field}`" in PAGE.split(f"### `{kind}`")[1].split("\n### ")[0], (kind, field)


def test_version_names_the_reconciler_and_python(fleet: Fleet) -> None:
    import platform

    from reconciler import __version__

    document = fleet.document("version")
    text = fleet.run("version")

    check_document(document, "Version")
    assert document["reconcilerVersion"] == __version__
    assert document["pythonVersion"] == platform.python_version()
    assert text.splitlines() == [f"reconciler {__version__}", f"python {document['pythonVersion']}"]
