"""``spec.operations.retryWithoutFail`` (O5's limits) is read into the settings and checked at
``validate``: a limit of zero, a negative one, one not below the time limit of the operations its
step runs in, or a step that never retries without fail is one line naming the place. A plugin's
step counts when the plugin is installed (a real distribution on PYTHONPATH, found through the
``reconciler.steps`` entry point)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from reconciler.config.settings_checks import RETRY_STEPS
from reconciler.core.model import RetryLimits
from reconciler.operations.steps import BUILTIN_STAGES
from reconciler.source.loader import load_repo
from tests.support.repos import RepoFactory, small_repo


def _settings(operations: str) -> dict[str, str]:
    text = (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Settings\nmetadata: {name: settings}\n"
        f"spec:\n  operations: {operations}\n"
    )
    return {**small_repo(), "reconciler.yaml": text}


def _errors(root: Path) -> list[str]:
    return [d.format().removeprefix(f"{root}/") for d in load_repo(root).diagnostics]


def test_the_pure_cores_list_of_steps_that_retry_without_fail_is_the_engines() -> None:
    found: dict[str, list[str]] = {}
    for kind, stages in BUILTIN_STAGES.items():
        for _, steps in stages:
            for step in steps:
                if step.retry_without_fail is not None:
                    found.setdefault(step.name, []).append(str(kind))

    assert {name: tuple(kinds) for name, kinds in found.items()} == dict(RETRY_STEPS)


def test_the_limits_are_read_into_the_settings(make_repo: RepoFactory) -> None:
    root = make_repo(
        _settings("{retryWithoutFail: {default: 2m, steps: {Wait_For_Managed_Resources: 1h30m}}}")
    )

    loaded = load_repo(root)

    assert list(loaded.diagnostics) == []
    assert loaded.repo is not None
    assert loaded.repo.settings.retry_limits == RetryLimits(
        default=timedelta(minutes=2),
        steps={"Wait_For_Managed_Resources": timedelta(hours=1, minutes=30)},
    )


def test_zero_too_long_and_unknown_limits_are_refused_each_at_its_place(
    make_repo: RepoFactory,
) -> None:
    root = make_repo(
        _settings(
            "{retryWithoutFail: {default: 0m, steps: {Wait_For_Managed_Resources: 24h, "
            "Apply_Modules: 1m, Wait_For_Managed_Resource: 1m}}}"
        )
    )

    listing = "(steps that retry without fail: Wait_For_Managed_Resources)"
    assert _errors(root) == [
        "reconciler.yaml:5:44: C1 a retry-without-fail limit must be more than 0 (e.g. 30s, 10m "
        "or 1h) (/spec/operations/retryWithoutFail/default)",
        "reconciler.yaml:5:84: C1 a retry-without-fail limit of 24h is not below the deprovision "
        "timeout (24h): the operation would time out before the step is skipped "
        "(/spec/operations/retryWithoutFail/steps/Wait_For_Managed_Resources)",
        f"reconciler.yaml:5:89: C1 step Apply_Modules does not retry without fail: it is never "
        f"skipped {listing} (/spec/operations/retryWithoutFail/steps/Apply_Modules)",
        f"reconciler.yaml:5:108: C1 no installed step has this name {listing}; did you mean "
        "'Wait_For_Managed_Resources'? "
        "(/spec/operations/retryWithoutFail/steps/Wait_For_Managed_Resource)",
    ]


def test_a_longer_deprovision_timeout_allows_a_longer_limit(make_repo: RepoFactory) -> None:
    limit = "retryWithoutFail: {default: 30h}"
    longer = make_repo(_settings(f"{{timeouts: {{deprovision: 48h}}, {limit}}}"), "longer")
    shorter = make_repo(_settings(f"{{timeouts: {{deprovision: 2h}}, {limit}}}"), "shorter")

    assert _errors(longer) == []  # 30h < 48h
    assert _errors(shorter) == [
        "reconciler.yaml:5:73: C1 a retry-without-fail limit of 30h is not below the deprovision "
        "timeout (2h): the operation would time out before the step is skipped "
        "(/spec/operations/retryWithoutFail/default)"
    ]


def test_a_negative_limit_is_not_a_duration(make_repo: RepoFactory) -> None:
    root = make_repo(_settings("{retryWithoutFail: {default: -5m}}"))

    assert _errors(root) == [
        "reconciler.yaml:5:44: C1 spec.operations.retryWithoutFail.default is not a duration "
        "such as 30s, 10m or 1h30m (whole hours, minutes and seconds in that order; no sign, no "
        "spaces) (/spec/operations/retryWithoutFail/default)"
    ]


PLUGINS = """
from reconciler.operations.model import OperationType, StepResult
from reconciler.operations.steps import Step


class WaitForDns(Step):
    name = "Wait_For_Dns"
    operations = (OperationType.DEPROVISION,)
    stage = "resources"
    retry_without_fail = 120.0

    def run(self, operation, context):
        return StepResult("waiting", retry_after=10)


class Announce(Step):
    name = "Announce"
    operations = (OperationType.DEPROVISION,)
    stage = "finish"

    def run(self, operation, context):
        return StepResult("announced")
"""


def _install_plugins(folder: Path) -> Path:
    """Two plugin steps as an installed distribution: one retries without fail, one does not."""
    folder.mkdir()
    (folder / "dns_steps.py").write_text(PLUGINS)
    info = folder / "dns_steps-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dns-steps\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        "[reconciler.steps]\ndns = dns_steps:WaitForDns\nannounce = dns_steps:Announce\n"
    )
    return folder


def test_an_installed_plugins_step_that_retries_without_fail_may_be_named(
    make_repo: RepoFactory, tmp_path: Path
) -> None:
    plugins = _install_plugins(tmp_path / "plugins")
    good = make_repo(_settings("{retryWithoutFail: {steps: {Wait_For_Dns: 10m}}}"), "good")
    bad = make_repo(_settings("{retryWithoutFail: {steps: {Announce: 10m}}}"), "bad")
    env = {**os.environ, "PYTHONPATH": str(plugins)}

    def validate(root: Path) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "reconciler", "validate", str(root)]
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)

    accepted, refused = validate(good), validate(bad)

    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert refused.returncode == 1
    assert refused.stdout == (
        f"{bad}/reconciler.yaml:5:43: C1 step Announce does not retry without fail: it is never "
        "skipped (steps that retry without fail: Wait_For_Dns, Wait_For_Managed_Resources) "
        "(/spec/operations/retryWithoutFail/steps/Announce)\n"
    )
