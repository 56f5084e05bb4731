"""The bundled sample fleet is valid and shows what the issue promises it shows.

`sample-repo/` is the README's first example and the fixture of many tests; these checks keep it
realistic: every feature of the config format appears at least once.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from reconciler.cli import cli
from reconciler.core.model import LABEL_APP_VERSION, ConfigRepo, Module, ModuleKind, Strategy
from reconciler.core.resolve import resolve_runtime
from reconciler.render import default_renderer
from reconciler.source.loader import load_repo

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def sample() -> ConfigRepo:
    validation = load_repo(ROOT / "sample-repo")
    assert validation.diagnostics == ()
    assert validation.repo is not None
    return validation.repo


def test_fleet_shape(sample: ConfigRepo) -> None:
    runtimes = sample.runtimes.values()
    assert len(sample.runtimes) >= 4
    assert {r.channel for r in runtimes} >= {"regular", "fast", "experimental"}
    assert any(ref.version for r in runtimes for ref in r.modules), "a pin"
    assert any(ref.strategy is Strategy.IGNORE for r in runtimes for ref in r.modules)
    assert any(r.maintenance_window for r in runtimes)
    assert set(sample.channels) == {"regular", "fast", "experimental"}


def test_module_shape(sample: ConfigRepo) -> None:
    modules = [m for m in sample.modules.values() if not _templated(m)]
    assert len(modules) >= 5
    assert all(2 <= len(m.versions) <= 3 for m in modules)
    assert any(m.depends_on for m in modules)
    assert any(m.mandatory for m in modules)
    assert any(v.requires_downtime for m in modules for v in m.versions.values())


def test_the_sample_shows_a_kustomize_overlay(sample: ConfigRepo) -> None:
    kinds = {v.kind for m in sample.modules.values() for v in m.versions.values()}
    assert ModuleKind.KUSTOMIZE in kinds


def _templated(module: Module) -> bool:
    return any(v.kind.templated for v in module.versions.values())


def test_every_operator_reports_its_folder_version(sample: ConfigRepo) -> None:
    for module in (m for m in sample.modules.values() if not _templated(m)):
        for version, content in module.versions.items():
            if content.kind is not ModuleKind.MANIFEST:
                continue  # rendered per runtime: test_the_chart_module_renders_per_runtime
            kinds = {o["kind"] for o in content.objects}
            assert {"CustomResourceDefinition", "ServiceAccount", "Deployment"} <= kinds
            assert kinds & {"ClusterRole", "Role"}, f"{module.name} {version} has RBAC"
            _assert_operator_version(content.objects, module, version)


def _assert_operator_version(
    objects: Iterable[Mapping[str, Any]], module: Module, version: str
) -> None:
    operator = next(
        o
        for o in objects
        if o["kind"] == module.operator_kind and o["metadata"]["name"] == module.operator_name
    )
    assert operator["metadata"]["labels"][LABEL_APP_VERSION] == version


def test_the_chart_module_renders_per_runtime() -> None:
    """One module is a Helm chart (with values.schema.json), taken by several runtimes with
    values from the channel, the runtime entry and a valuesFrom file."""
    validation = load_repo(ROOT / "sample-repo", renderer=default_renderer())
    repo = validation.repo
    assert repo is not None, [d.format() for d in validation.diagnostics]
    charts = {
        m.name: m
        for m in repo.modules.values()
        for v in m.versions.values()
        if v.kind is ModuleKind.CHART and v.template is not None
        if "values.schema.json" in v.template.files
    }
    assert charts
    taking = 0
    for runtime in repo.runtimes.values():
        for resolved in resolve_runtime(repo, runtime).modules:
            if resolved.name in charts:
                rendered = repo.rendered[(runtime.name, resolved.name)]
                _assert_operator_version(rendered.objects, charts[resolved.name], resolved.version)
                taking += 1
    assert taking >= 2
    refs = [ref for r in repo.runtimes.values() for ref in r.modules]
    assert any(ref.values_from for ref in refs)
    assert any(ref.values for ref in refs)
    assert any(c.values for c in repo.channels.values())


def test_the_downgrade_scenario_reads_downgrade_not_supported(tmp_path: Path) -> None:
    """The README's downgrade scenario, done as written on snapshot clusters: the commit is
    valid, `diff` shows the downgrade blocked and `sync` leaves the module running its version,
    `Warning`, `DowngradeNotSupported` (L5)."""
    scenario = next(
        line
        for line in (ROOT / "sample-repo" / "README.md").read_text().split("\n- ")
        if "DowngradeNotSupported" in line
    )
    assert scenario.startswith("Pin `api-gateway` to `version: 1.0.0` on dev-sandbox")
    for folder in ("sample-repo", "channels"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    fleet, clusters = str(tmp_path / "sample-repo"), f"{tmp_path / 'clusters'}/"
    where = ["--runtime", "dev-sandbox", "--snapshot", clusters]
    assert _run("sync", fleet, *where, "--snapshot-create").exit_code == 0
    runtime = tmp_path / "sample-repo" / "runtimes" / "dev-sandbox.yaml"
    edited = runtime.read_text().replace(
        "    - name: api-gateway\n", "    - name: api-gateway\n      version: 1.0.0\n"
    )
    runtime.write_text(edited)

    assert _run("validate", fleet).exit_code == 0
    planned = _run("diff", fleet, *where)
    synced = _run("sync", fleet, *where)

    assert "api-gateway      blocked-downgrade 1.2.0 -> 1.0.0 [DowngradeNotSupported]" in (
        planned.output
    )
    assert synced.exit_code == 0, synced.output
    assert "api-gateway      Warning    1.2.0    DowngradeNotSupported: " in synced.output
    assert " C8 " not in planned.output + synced.output


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))
