"""The documents commands print with ``-o json`` / ``-o yaml``: each carries ``apiVersion:
reconciler.dev/v1`` and its ``kind``, and validates against its schema in
``schemas/output/output.schema.json``, which ``docs/json-output.md`` documents kind by kind.

Every command runs for real on a copy of the sample fleet, against snapshot clusters and a
SQLite state store in a temporary folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.daemon.service import Daemon
from reconciler.operations.store import SqliteStore
from tests.core.test_redaction import _Source

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "output" / "output.schema.json").read_text())
KINDS = sorted(name for name in SCHEMA["$defs"] if name[0].isupper())
PAGE = (ROOT / "docs" / "json-output.md").read_text()


def _check(document: dict[str, Any], kind: str) -> None:
    """``document`` is a ``kind`` of our version and valid against that kind's schema."""
    assert (document["apiVersion"], document["kind"]) == ("reconciler.dev/v1", kind)
    schema = {"$defs": SCHEMA["$defs"], "$ref": f"#/$defs/{kind}"}
    jsonschema.Draft202012Validator(schema).validate(document)


class Fleet:
    """The sample fleet (repo and channels) copied to ``root``, with snapshot clusters and a
    state store beside it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        shutil.copytree(ROOT / "sample-repo", root / "sample-repo")
        shutil.copytree(ROOT / "channels", root / "channels")
        self.repo = root / "sample-repo"
        self.clusters = root / "clusters"
        self.clusters.mkdir()  # empty recorded clusters: a --snapshot not there is refused
        self.state = ["--state", f"sqlite:///{root / 'state.db'}"]

    def run(self, *args: str, code: int = 0) -> str:
        result = CliRunner().invoke(cli, list(args))
        assert result.exit_code == code, result.output
        return result.stdout

    def document(self, *args: str, code: int = 0, output: str = "json") -> dict[str, Any]:
        text = self.run(*args, "-o", output, code=code)
        parsed: dict[str, Any] = json.loads(text) if output == "json" else yaml.safe_load(text)
        return parsed

    def synced(self) -> Fleet:
        self.run("sync", str(self.repo), "--snapshot", f"{self.clusters}/", *self.state)
        return self


@pytest.fixture
def fleet(tmp_path: Path) -> Fleet:
    return Fleet(tmp_path)


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_validate_prints_the_same_keys_valid_or_not(fleet: Fleet, output: str) -> None:
    valid = fleet.document("validate", str(fleet.repo), output=output)
    broken = ROOT / "tests" / "support" / "fixtures" / "broken-repo"
    invalid = fleet.document("validate", str(broken), code=1, output=output)

    _check(valid, "Validation")
    _check(invalid, "Validation")
    assert valid.keys() == invalid.keys()
    assert valid["valid"]
    assert not invalid["valid"]
    assert invalid["errors"]


def test_a_live_diff_and_a_dry_run_sync(fleet: Fleet) -> None:
    where = ["--snapshot", f"{fleet.clusters}/", *fleet.state]

    live = fleet.document("diff", str(fleet.repo), *where, code=1)
    dry = fleet.document("sync", str(fleet.repo), "--dry-run", *where)

    _check(live, "LiveDiff")
    _check(dry, "SyncPlan")
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

    _check(report, "SyncReport")
    _check(status, "RuntimeStatusList")
    _check(listed, "OperationList")
    _check(shown, "Operation")
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

    _check(document, "FleetDiff")
    assert document["summary"][0]["module"] == "serverless"


def test_the_daemons_status(fleet: Fleet) -> None:
    fleet.synced()
    store = SqliteStore(fleet.root / "state.db")
    daemon = Daemon(_Source(), store, lambda access, name: None, lambda: None)  # type: ignore[arg-type,return-value]
    try:
        document = daemon.status()
    finally:
        daemon.close()

    _check(document, "DaemonStatus")
    assert len(document["runtimes"]) == 6


def test_every_kind_is_documented_with_its_fields() -> None:
    for kind in KINDS:
        assert f"### `{kind}`" in PAGE, kind
        for field in SCHEMA["$defs"][kind]["properties"]:
            assert f"`{field}`" in PAGE.split(f"### `{kind}`")[1].split("\n### ")[0], (kind, field)
