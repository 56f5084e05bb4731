"""The command line imports only what the invoked command needs.

Each case runs a command in a fresh interpreter and lists the heavy modules it left in
``sys.modules``: the Kubernetes client, the daemon's scheduler, HTTP server and metrics are never
paid for by ``validate``, ``render`` or ``diff --base``; ``reconciler --help`` does not even load
the config loader.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SAMPLE = ROOT / "sample-repo"

#: Libraries of the cluster adapter and the daemon, and our stages that use them.
CLUSTER_AND_DAEMON = (
    "kubernetes",
    "apscheduler",
    "waitress",
    "prometheus_client",
    "reconciler.cluster.kube",
    "reconciler.daemon",
    "reconciler.operations.engine",
)
#: What reading a repo from a folder never needs.
GIT_AND_SCHEMA_ERRORS = ("git", "reconciler.source.git", "jsonschema")
#: The full schema validator also checks the values of a chart that ships values.schema.json
#: (the sample's metrics-proxy does): a repo of plain manifests never loads it.
GIT = GIT_AND_SCHEMA_ERRORS[:2]
#: What reading and comparing repos never needs: the state store (click computes ``--state``'s
#: default for every command that has it), package metadata (plugin steps: only for a repo whose
#: settings name ``disabledSteps``).
STORE_AND_METADATA = ("reconciler.operations", "sqlite3", "importlib.metadata")
#: The modules of the commands other than ``diff``: a command imports only its own module.
OTHER_COMMANDS = tuple(
    f"reconciler.cli.{name}"
    for name in (
        *("validate", "render", "sync", "operations", "status", "get", "tree", "check"),
        *("members", "daemon", "suspend", "rollout", "rbac"),
    )
)
#: The engines of templated modules: a repo's first chart, overlay or source imports its own.
RENDER_ENGINES = tuple(f"reconciler.render.{name}" for name in ("helm", "kustomize", "sources"))
#: What a command line that runs no command never needs.
LOADER = ("yaml", "fastjsonschema", "reconciler.source", "reconciler.config", "sqlite3")

_PROBE = """
import json, sys
from reconciler.cli import main
try:
    main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
print(json.dumps({"exit": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def _imported_by(*args: str, cwd: Path = ROOT) -> tuple[int, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["exit"], set(report["modules"])


def _loaded(modules: set[str], roots: tuple[str, ...]) -> set[str]:
    return {m for m in modules for root in roots if m == root or m.startswith(root + ".")}


def test_importing_the_cli_loads_only_click_and_the_command_declarations() -> None:
    code, modules = _imported_by("--help")

    assert code == 0
    assert not _loaded(modules, CLUSTER_AND_DAEMON + GIT_AND_SCHEMA_ERRORS + LOADER)
    assert "reconciler.cli.validate" in modules  # the commands are declared, not run


@pytest.mark.parametrize(
    "args",
    [
        ("validate", str(SAMPLE)),
        ("validate", str(SAMPLE), "--format", "json"),
        ("render", str(SAMPLE), "--runtime", "prod-us-1"),
    ],
    ids=["validate", "validate-json", "render"],
)
def test_validate_and_render_load_neither_git_nor_cluster_nor_daemon(args: tuple[str, ...]) -> None:
    code, modules = _imported_by(*args)

    assert code == 0
    assert not _loaded(modules, CLUSTER_AND_DAEMON + GIT + STORE_AND_METADATA)
    assert "reconciler.source.loader" in modules  # the probe does see what a command loads


def test_a_repo_with_errors_loads_the_full_schema_validator_for_them() -> None:
    code, modules = _imported_by(
        "validate", str(ROOT / "tests" / "support" / "fixtures" / "broken-repo")
    )

    assert code == 1
    assert "jsonschema" in modules
    assert not _loaded(modules, CLUSTER_AND_DAEMON)


def test_a_fleet_diff_loads_git_but_neither_cluster_nor_daemon_nor_lifecycle(
    tmp_path: Path,
) -> None:
    git = ["git", "-c", "user.email=t@example.io", "-c", "user.name=t"]
    subprocess.run(["cp", "-r", str(SAMPLE), str(tmp_path / "fleet")], check=True)
    subprocess.run(["cp", "-r", str(ROOT / "channels"), str(tmp_path / "channels")], check=True)
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=tmp_path, check=True)

    code, modules = _imported_by("diff", "fleet", "--base", "HEAD", cwd=tmp_path)

    assert code == 0
    assert "reconciler.source.git" in modules
    assert not _loaded(modules, (*CLUSTER_AND_DAEMON, "reconciler.lifecycle"))
    assert not _loaded(modules, STORE_AND_METADATA)
    assert not _loaded(modules, (*OTHER_COMMANDS, "click.shell_completion"))
    assert "reconciler.core.status" not in modules  # a pass's values; the planner's reasons only
    assert not _loaded(modules, ("reconciler.source.signatures", "reconciler.core.signatures"))
    assert "reconciler.core.rollouts" not in modules  # the sample repo has no rollout policy


def test_plain_manifests_load_neither_the_full_schema_validator_nor_helm(tmp_path: Path) -> None:
    from tests.support.fleet_generator import generate_fleet

    generate_fleet(tmp_path / "fleet", 20, modules=4, versions=2)

    code, modules = _imported_by("validate", str(tmp_path / "fleet"))

    assert code == 0
    assert not _loaded(modules, (*GIT_AND_SCHEMA_ERRORS, *STORE_AND_METADATA, "helm_python"))
    assert not _loaded(modules, RENDER_ENGINES)
