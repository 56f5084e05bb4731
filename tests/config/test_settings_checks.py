"""Settings that refer to steps that cannot be switched off, or to zero durations, are refused
(nothing accepted that would then fail for ever): each at its place, the unknown name not repeated,
the optional steps listed with a did-you-mean. Plugin steps count when the plugin is installed (a
real distribution on PYTHONPATH, found through the ``reconciler.steps`` entry point)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from reconciler.config.settings_checks import BUILTIN_STEPS
from reconciler.operations.steps import BUILTIN_STAGES
from reconciler.source.loader import load_repo
from tests.support.repos import RepoFactory, small_repo

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "announce-step" / "announce_step.py"


def _settings(operations: str, intervals: str = "{}") -> dict[str, str]:
    text = (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Settings\nmetadata: {name: settings}\n"
        f"spec:\n  operations: {operations}\n  intervals: {intervals}\n"
    )
    return {**small_repo(), "reconciler.yaml": text}


def _errors(root: Path) -> list[str]:
    return [d.format().removeprefix(f"{root}/") for d in load_repo(root).diagnostics]


def test_the_step_list_of_the_pure_core_is_the_engines() -> None:
    stages = [steps for kind in BUILTIN_STAGES.values() for _, steps in kind]
    found = {step.name: step.optional for steps in stages for step in steps}

    assert dict(BUILTIN_STEPS) == found


def test_steps_that_cannot_be_switched_off_are_refused(make_repo: RepoFactory) -> None:
    root = make_repo(_settings("{disabledSteps: [Check_Cluster_Acces, Apply_Modules]}"))

    none = "no step installed here is optional; plugins may offer optional steps"
    assert _errors(root) == [
        f"reconciler.yaml:5:32: C1 no optional step has this name ({none}) "
        "(/spec/operations/disabledSteps/0)",
        f"reconciler.yaml:5:53: C1 step Apply_Modules cannot be switched off: it is not "
        f"optional ({none}) (/spec/operations/disabledSteps/1)",
    ]


def test_zero_durations_are_refused(make_repo: RepoFactory) -> None:
    files = _settings(
        "{timeouts: {update: 0s, provision: 1h}}", "{poll: '', resync: 0h0m, debounce: 0s}"
    )

    assert _errors(make_repo(files)) == [
        "reconciler.yaml:5:35: C1 the update timeout must be more than 0 (e.g. 30s, 10m or 3h) "
        "(/spec/operations/timeouts/update)",
        "reconciler.yaml:6:21: C1 the poll interval must be more than 0 (e.g. 30s, 10m or 3h) "
        "(/spec/intervals/poll)",
        "reconciler.yaml:6:33: C1 the resync interval must be more than 0 (e.g. 30s, 10m or 3h) "
        "(/spec/intervals/resync)",
        "reconciler.yaml:6:49: C1 the debounce interval must be more than 0 (e.g. 30s, 10m or 3h) "
        "(/spec/intervals/debounce)",
    ]


def _install_plugin(folder: Path) -> Path:
    """The documented plugin as an installed distribution: module, metadata, entry point."""
    folder.mkdir()
    (folder / "announce_step.py").write_text(EXAMPLE.read_text())
    info = folder / "reconciler_announce_step-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: reconciler-announce-step\nVersion: 0.1.0\n"
    )
    (info / "entry_points.txt").write_text(
        "[reconciler.steps]\nannounce = announce_step:AnnounceModules\n"
    )
    return folder


def test_an_installed_plugins_optional_step_may_be_switched_off(
    make_repo: RepoFactory, tmp_path: Path
) -> None:
    plugins = _install_plugin(tmp_path / "plugins")
    good = make_repo(_settings("{disabledSteps: [Announce_Modules]}"), "good")
    typo = make_repo(_settings("{disabledSteps: [Announce_Module]}"), "typo")
    env = {**os.environ, "PYTHONPATH": str(plugins)}

    def validate(root: Path) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "reconciler", "validate", str(root)]
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)

    accepted, refused = validate(good), validate(typo)

    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert refused.returncode == 1
    assert refused.stdout == (
        f"{typo}/reconciler.yaml:5:32: C1 no optional step has this name (optional steps: "
        "Announce_Modules); did you mean 'Announce_Modules'? (/spec/operations/disabledSteps/0)\n"
    )
    assert "Traceback" not in refused.stderr


def _rollout(waves: str) -> dict[str, str]:
    text = (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Settings\nmetadata: {name: settings}\n"
        f"spec:\n  rollout:\n    waves: {waves}\n    healthyFor: 30m\n    haltAfterErrors: 2\n"
    )
    return {**small_repo(), "reconciler.yaml": text}


def test_a_rollout_policy_is_read_into_the_settings(make_repo: RepoFactory) -> None:
    root = make_repo(_rollout("[{name: canary, selector: tier=dev}, {name: early, percent: 10}]"))

    repo = load_repo(root).repo
    assert repo is not None
    policy = repo.settings.rollout
    assert policy is not None
    assert [w.describe for w in policy.waves] == ["tier=dev", "10%"]
    assert policy.healthy_for.total_seconds() == 1800
    assert policy.max_errors == 2


def test_rollout_waves_with_a_bad_selector_or_a_name_twice_are_refused(
    make_repo: RepoFactory,
) -> None:
    root = make_repo(_rollout("[{name: a, selector: 'tier in dev'}, {name: a, percent: 5}]"))

    assert _errors(root) == [
        "reconciler.yaml:6:33: C1 not a label selector: label selector 'tier in dev': cannot "
        "read 'tier in dev' (use key=value, key!=value, key in (a,b), key notin (a,b), key or "
        "!key) (/spec/rollout/waves/0/selector)",
        "reconciler.yaml:6:56: C1 wave a is named twice; each wave needs its own name "
        "(/spec/rollout/waves/1/name)",
    ]
