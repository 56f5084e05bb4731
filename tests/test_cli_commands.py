"""The command line as a user meets it: validate, render, exit codes, help."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from reconciler import __version__
from reconciler.cli import cli, main
from reconciler.core.model import (
    ANNOTATION_MODULE_VERSION,
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    LABEL_RUNTIME,
)
from reconciler.source.loader import load_repo

ROOT = Path(__file__).parent.parent
SAMPLE = ROOT / "sample-repo"
RUNTIMES = sorted(p.stem for p in (SAMPLE / "runtimes").glob("*.yaml"))


def _exit_code(*args: str) -> int:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    return int(done.value.code or 0)


def test_validate_sample_repo() -> None:
    result = CliRunner().invoke(cli, ["validate", str(SAMPLE)])

    assert result.exit_code == 0
    assert f"valid: {len(RUNTIMES)} runtimes, 6 modules (16 versions), 3 channels" in result.stdout


def test_validate_json_document() -> None:
    result = CliRunner().invoke(cli, ["validate", str(SAMPLE), "--format", "json"])

    report = json.loads(result.stdout)
    assert report["valid"] is True
    assert report["errors"] == []
    assert report["runtimes"] == RUNTIMES
    assert set(report["channels"]) == {"regular", "fast", "experimental"}


def test_exit_codes(tmp_path: Path) -> None:
    assert _exit_code("validate", str(SAMPLE)) == 0
    assert _exit_code("validate", str(ROOT / "tests" / "fixtures" / "broken-repo")) == 1
    assert _exit_code("validate", str(tmp_path / "missing")) == 2
    assert _exit_code("validate", "--format", "xml", str(SAMPLE)) == 2
    assert _exit_code("render", str(SAMPLE)) == 2  # --runtime is required


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_render_every_runtime_gives_labelled_objects(runtime: str) -> None:
    result = CliRunner().invoke(cli, ["render", str(SAMPLE), "--runtime", runtime])

    assert result.exit_code == 0, result.output
    objects = [o for o in yaml.safe_load_all(result.stdout) if o is not None]
    validation = load_repo(SAMPLE)
    assert validation.repo is not None
    assert objects
    for body in objects:
        metadata = body["metadata"]
        assert metadata["labels"][LABEL_MANAGED_BY] == "reconciler"
        assert metadata["labels"][LABEL_RUNTIME] == runtime
        module = validation.repo.modules[metadata["labels"][LABEL_MODULE]]
        assert metadata["annotations"][ANNOTATION_MODULE_VERSION] in module.versions


def test_render_heads_each_module_with_its_origin() -> None:
    result = CliRunner().invoke(cli, ["render", str(SAMPLE), "--runtime", "prod-us-1"])

    assert "# module serverless 1.2.0: pinned, listed, strategy CreateAndDelete" in result.stdout
    assert "# module keda 1.0.0: channel regular, listed, strategy Ignore" in result.stdout
    assert "# module istio 1.0.0: channel regular, mandatory" in result.stdout


def test_render_one_module() -> None:
    args = ["render", str(SAMPLE), "--runtime", "staging-eu", "--module", "telemetry"]
    result = CliRunner().invoke(cli, args)

    objects = [o for o in yaml.safe_load_all(result.stdout) if o]
    assert {o["metadata"]["labels"][LABEL_MODULE] for o in objects} == {"telemetry"}
    assert "channel experimental (module override)" in result.stdout


def test_render_unknown_runtime_or_module() -> None:
    result = CliRunner().invoke(cli, ["render", str(SAMPLE), "--runtime", "prod-us"])
    assert _exit_code("render", str(SAMPLE), "--runtime", "prod-us") == 2
    assert result.exit_code != 0

    args = ["render", str(SAMPLE), "--runtime", "prod-us-1", "--module", "telemetri"]
    assert _exit_code(*args) == 2


def test_render_invalid_repo_prints_errors_and_nothing_else(
    capsys: pytest.CaptureFixture[str],
) -> None:
    broken = str(ROOT / "tests" / "fixtures" / "broken-repo")

    assert _exit_code("render", broken, "--runtime", "dev") == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "runtimes/dev.yaml:10:7: C1 unknown field 'strategie'" in captured.err


def test_errors_name_the_problem(capsys: pytest.CaptureFixture[str]) -> None:
    _exit_code("render", str(SAMPLE), "--runtime", "prod-us")

    assert "runtime 'prod-us' does not exist; did you mean 'prod-us-1'?" in capsys.readouterr().err


def test_version_and_help() -> None:
    runner = CliRunner()
    assert __version__ in runner.invoke(cli, ["--version"]).stdout
    for command, option in (("validate", "--format"), ("render", "--runtime")):
        result = runner.invoke(cli, [command, "--help"])
        assert result.exit_code == 0
        assert option in result.stdout


def test_validate_fetches_channels_kept_in_a_git_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    import subprocess

    from tests.test_daemon import GitServer

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    channels = tmp_path / "channels-repo"
    shutil.copytree(ROOT / "channels", channels / "channels")
    git = ["git", "-c", "user.email=t@example.io", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=channels, check=True)
    subprocess.run([*git, "add", "-A"], cwd=channels, check=True)
    subprocess.run([*git, "commit", "-qm", "channels"], cwd=channels, check=True)
    served = tmp_path / "served"
    clone = ["git", "clone", "-q", "--bare", str(channels), str(served / "remote.git")]
    subprocess.run(clone, check=True)
    server = GitServer(served)
    server.start()
    fleet = tmp_path / "fleet"
    shutil.copytree(SAMPLE, fleet)
    settings = fleet / "reconciler.yaml"
    settings.write_text(
        settings.read_text().replace(
            "    path: ../channels", f"    git: {server.url}\n    ref: main\n    subPath: channels"
        )
    )
    try:
        result = CliRunner().invoke(cli, ["validate", str(fleet)])
    finally:
        server.stop()

    assert result.exit_code == 0, result.output
    assert "3 channels" in result.stdout
