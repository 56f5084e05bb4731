"""kubectl's ``--kubeconfig`` and ``--context`` (one cluster for every selected runtime, over
its ``spec.cluster``), and the one-line errors of a kubeconfig that is not there or lacks the
context asked for (naming the path, the context and the contexts there are, never a
credential). Kubeconfig files are written by the tests; the flags' proof reaches the real API
server."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli import cli
from tests.support.kube_control_plane import ControlPlane
from tests.support.sample_fleet import Fleet

SECRET = "    kubeconfigSecret:\n      name: prod-eu-1-kubeconfig\n      key: config\n"
TOKEN = "not-to-be-printed-0123456789"  # a fake credential the output must not hold


def _check(fleet: Fleet, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    argv = ["check", str(fleet.repo), "--runtime", "prod-eu-1", *args]
    result = CliRunner().invoke(cli, argv, env=env, terminal_width=400)
    return result.exit_code, result.output


def _with_context(fleet: Fleet, context: str) -> Fleet:
    runtime = fleet.repo / "runtimes" / "prod-eu-1.yaml"
    text = runtime.read_text()
    assert SECRET in text
    runtime.write_text(text.replace(SECRET, f"    context: {context}\n"))
    return fleet


def _kubeconfig(path: Path, *contexts: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": TOKEN}}],
        "contexts": [{"name": n, "context": {"cluster": "c", "user": "u"}} for n in contexts],
        "current-context": contexts[0],
    }
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_flags_are_kubectls_and_documented() -> None:
    for command in ("sync", "diff", "check", "tree", "reconcile"):
        shown = CliRunner().invoke(cli, [command, "--help"], terminal_width=400).output
        assert "--kubeconfig FILE" in shown or "--kubeconfig PATH" in shown, command
        assert "--context TEXT" in shown, command


def test_a_kubeconfig_env_naming_no_file_names_the_path(tmp_path: Path) -> None:
    fleet = _with_context(Fleet(tmp_path), "dev")
    gone = tmp_path / "gone.yaml"

    code, shown = _check(fleet, env={"KUBECONFIG": str(gone)})

    assert code == 1
    assert f"KUBECONFIG names {gone}: no such file" in shown


def test_a_missing_context_is_named_with_the_ones_there_are(tmp_path: Path) -> None:
    fleet = _with_context(Fleet(tmp_path), "staging")
    config = _kubeconfig(tmp_path / "config", "dev", "prod")

    code, shown = _check(fleet, env={"KUBECONFIG": str(config)})
    flag_code, flag_shown = _check(fleet, "--kubeconfig", str(config), "--context", "qa")

    assert code == flag_code == 1
    assert f"no context 'staging' in kubeconfig {config} (it has: dev, prod)" in shown
    assert "cannot use --kubeconfig" in flag_shown
    assert "no context 'qa'" in flag_shown
    assert TOKEN not in shown + flag_shown


def test_a_missing_kubeconfig_flag_file_is_named(tmp_path: Path) -> None:
    gone = tmp_path / "gone.yaml"

    code, shown = _check(Fleet(tmp_path), "--kubeconfig", str(gone))

    assert code == 1
    assert f"cannot use --kubeconfig {gone}: no such file" in shown


def test_the_flags_are_refused_with_a_snapshot(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)

    code, shown = _check(fleet, "--snapshot", f"{fleet.clusters}/", "--context", "dev")

    assert code == 2
    assert "without --kubeconfig and --context" in shown


@pytest.mark.kube
def test_the_flags_reach_the_runtime_through_that_kubeconfig(
    tmp_path: Path, kube_control_plane: ControlPlane
) -> None:
    fleet = Fleet(tmp_path)  # prod-eu-1's spec.cluster: a Secret no cluster here has
    kubeconfig = str(kube_control_plane.kubeconfig)
    context = yaml.safe_load(kube_control_plane.kubeconfig.read_text())["current-context"]

    code, shown = _check(fleet, "--kubeconfig", kubeconfig)
    named_code, named = _check(fleet, "--context", context, env={"KUBECONFIG": kubeconfig})

    assert code == named_code == 0, shown + named
    for output in (shown, named):
        assert output.splitlines()[1].split()[:2] == ["prod-eu-1", "yes"]


@pytest.mark.parametrize("command", ["sync", "diff", "check"])
def test_the_flags_point_one_runtime_only(tmp_path: Path, command: str) -> None:
    fleet = Fleet(tmp_path)
    config = _kubeconfig(tmp_path / "config", "dev")
    state = fleet.state if command == "sync" else []
    argv = [command, str(fleet.repo), "--kubeconfig", str(config), *state]

    result = CliRunner().invoke(cli, argv)

    assert result.exit_code == 2, result.output
    assert "name it with --runtime" in result.output
    assert not (tmp_path / "state.db").exists()  # refused before anything was done
