"""`reconciler diff --base` of a chart module (the sample fleet's metrics-proxy, in a real git
history): a change of any layer of values, a chart bump and an edit of the chart's files each
show on the runtimes they change, with the file and the field that caused it; a value no
template reads changes nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from tests.support.fleet_history import git

ROOT = Path(__file__).parents[2]
SAMPLE = "sample-repo"
CHART = f"{SAMPLE}/modules/metrics-proxy"


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """The sample fleet (and its channels) committed as the base."""
    for folder in (SAMPLE, "channels"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base")
    return tmp_path


def _edit(root: Path, path: str, old: str, new: str) -> None:
    file = root / path
    text = file.read_text(encoding="utf-8")
    assert old in text
    file.write_text(text.replace(old, new), encoding="utf-8")


def _causes(root: Path) -> dict[str, list[str]]:
    """Runtime -> the causes of its metrics-proxy change, from the JSON report."""
    result = CliRunner().invoke(cli, ["diff", str(root / SAMPLE), "--base", "HEAD", "-o", "json"])
    assert result.exit_code in (0, 1), result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return {
        r["runtime"]: [f"{c['path'].removeprefix(f'{root}/')}: {c['field']}" for c in m["causes"]]
        for r in report["runtimes"]
        for m in r["modules"]
        if m["module"] == "metrics-proxy"
    }


def test_a_channel_value_changes_the_runtimes_of_that_channel(fleet: Path) -> None:
    _edit(fleet, "channels/regular.yaml", "scrapeInterval: 60s", "scrapeInterval: 15s")
    assert _causes(fleet) == {
        "control-plane": ["channels/regular.yaml: spec.values.metrics-proxy.scrapeInterval"]
    }


def test_runtime_values_and_a_values_file_are_told_apart(fleet: Path) -> None:
    _edit(fleet, f"{SAMPLE}/runtimes/control-plane.yaml", "replicas: 2", "replicas: 3")
    _edit(fleet, f"{SAMPLE}/values/staging-eu.yaml", "cpu: 20m", "cpu: 30m")
    causes = _causes(fleet)
    assert causes["control-plane"] == [
        f"{SAMPLE}/runtimes/control-plane.yaml: spec.modules[1].values.replicas"
    ]
    assert causes["staging-eu"] == [f"{SAMPLE}/values/staging-eu.yaml: resources.requests.cpu"]


def test_a_chart_bump_is_an_upgrade_caused_by_the_channel(fleet: Path) -> None:
    _edit(fleet, "channels/regular.yaml", "metrics-proxy: 1.0.0", "metrics-proxy: 1.1.0")
    assert _causes(fleet) == {
        "control-plane": ["channels/regular.yaml: spec.modules.metrics-proxy"]
    }


def test_chart_files_and_version_values_are_causes(fleet: Path) -> None:
    _edit(fleet, f"{CHART}/1.1.0/chart/templates/service.yaml", "port: {{", "port: {{ add 0")
    _edit(fleet, f"{CHART}/1.1.0/chart/values.yaml", "port: 9090", "port: 9091")
    assert _causes(fleet) == {
        "staging-eu": [
            f"{CHART}/1.1.0/chart/values.yaml: service.port",  # a default, field by field
            f"{CHART}/1.1.0/chart: templates/service.yaml",
        ]
    }


def test_a_value_no_render_shows_changes_nothing(fleet: Path) -> None:
    # control-plane sets its own logLevel, staging-eu's channel (fast) too: the chart defaults'
    # change reaches neither (and 1.1.0's Service, as the server stores it, is no change either)
    for version in ("1.0.0", "1.1.0"):
        _edit(fleet, f"{CHART}/{version}/chart/values.yaml", "logLevel: info", "logLevel: error")
    result = CliRunner().invoke(cli, ["diff", str(fleet / SAMPLE), "--base", "HEAD"])
    assert result.exit_code == 0, result.output
    assert "no changes (6 runtimes)" in result.output
