"""The command line as a user meets it: validate, render, exit codes, help.

What the sample repo must give (each runtime's modules, versions and object counts, the summary
of ``validate``) is written out below as data, read off sample-repo/ and channels/ by hand: no
test works the answer out the way the product does. ``diff`` and ``sync`` have their own file
(test_diff_sync_cli.py).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner, Result

from reconciler import __version__
from reconciler.cli import cli, main
from reconciler.core.model import (
    ANNOTATION_DEFAULT_CONFIGURATION,
    ANNOTATION_MODULE_VERSION,
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    LABEL_RUNTIME,
)
from tests.support.repos import RepoFactory, channel_file, module_files, runtime_file, small_repo

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample-repo"
RUNTIMES = sorted(p.stem for p in (SAMPLE / "runtimes").glob("*.yaml"))
#: Compiler-style diagnostic: path:line:col: RULE message (pointer)
DIAGNOSTIC = re.compile(
    r"^(?P<path>[^:\s]+):(?P<line>[1-9]\d*):(?P<column>[1-9]\d*): (?P<rule>C[1-7]) "
    r"(?P<message>.+?)(?: \((?P<pointer>/[^()]*)\))?$"
)
SECRET = "hunter2-s3cr3t-Zq9"


def _invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


def _exit_code(*args: str | Path) -> int:
    with pytest.raises(SystemExit) as done:
        main([str(a) for a in args])
    code = done.value.code
    return code if isinstance(code, int) else 0 if code is None else 1


def _where(text: str, needle: str, occurrence: int = 1) -> tuple[int, int]:
    """1-based line and column of the ``occurrence``-th ``needle`` in ``text``."""
    index = -1
    for _ in range(occurrence):
        index = text.index(needle, index + 1)
    before = text[:index]
    return before.count("\n") + 1, index - (before.rfind("\n") + 1) + 1


# -- the sample repo's answers, read off sample-repo/ and channels/ by hand ----------------------

#: What each sample runtime runs: module -> (version, objects rendered). Versions by DESIGN.md §2
#: (a pin beats the module's channel beats the runtime's channel; istio is mandatory; api-gateway
#: depends on istio); objects: the documents of the version's manifest.yaml plus its default.yaml.
SAMPLE_RUNS: dict[str, dict[str, tuple[str, int]]] = {
    "control-plane": {
        "istio": ("1.0.0", 8),
        "metrics-proxy": ("1.0.0", 5),  # a Helm chart, rendered with the runtime's values
        "telemetry": ("1.0.0", 8),
    },
    "dev-sandbox": {
        "api-gateway": ("1.2.0", 10),
        "eventing": ("1.1.0", 8),
        "istio": ("1.2.0", 10),
        "keda": ("1.1.0", 9),
        "serverless": ("1.2.0", 9),
        "status-board": ("1.0.0", 3),  # a Kustomize overlay, pinned
        "telemetry": ("1.2.0", 9),
    },
    "prod-ap-1": {"istio": ("1.0.0", 8), "serverless": ("1.1.0", 10), "telemetry": ("1.0.0", 8)},
    "prod-eu-1": {
        "api-gateway": ("1.0.0", 8),
        "istio": ("1.0.0", 8),
        "serverless": ("1.1.0", 10),
        "telemetry": ("1.0.0", 8),
    },
    "prod-us-1": {
        "api-gateway": ("1.0.0", 8),
        "eventing": ("1.0.0", 7),
        "istio": ("1.0.0", 8),
        "keda": ("1.0.0", 7),
        "serverless": ("1.2.0", 9),
    },
    "staging-eu": {
        "api-gateway": ("1.1.0", 9),
        "eventing": ("1.1.0", 8),
        "istio": ("1.1.0", 9),
        "keda": ("1.1.0", 9),
        "metrics-proxy": ("1.1.0", 6),
        "serverless": ("1.2.0", 9),
        "telemetry": ("1.2.0", 9),
    },
}
#: Each module's versions (its folders under sample-repo/modules/).
SAMPLE_VERSIONS = {
    "api-gateway": ["1.0.0", "1.1.0", "1.2.0"],
    "eventing": ["1.0.0", "1.1.0"],
    "istio": ["1.0.0", "1.1.0", "1.2.0"],
    "keda": ["1.0.0", "1.1.0"],
    "metrics-proxy": ["1.0.0", "1.1.0"],
    "serverless": ["1.0.0", "1.1.0", "1.2.0"],
    "status-board": ["1.0.0"],
    "telemetry": ["1.0.0", "1.1.0", "1.2.0"],
}
#: ``dependsOn`` of the sample modules (only api-gateway has one).
SAMPLE_DEPENDS_ON = {"api-gateway": ["istio"]}
SAMPLE_CHANNELS = ["experimental", "fast", "regular"]
#: reconciler.yaml, 6 runtimes, 8 module.yaml, 16 manifests, 15 default.yaml (keda 1.0.0 has
#: none), 3 channels (a chart's or an overlay's files are read as its template, not counted).
SAMPLE_FILES = 49


# -- validate ------------------------------------------------------------------------------------


def test_validate_sample_repo_prints_its_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)

    result = _invoke("validate", "sample-repo")

    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "sample-repo: valid: 6 runtimes, 8 modules (19 versions), 3 channels, 49 files\n"
    )
    assert result.stderr == (  # its charts: nothing recorded in the test's private store
        "chart .Capabilities: control-plane, staging-eu: the engine default (Kubernetes "
        "v1.36.0: no sync recorded their clusters)\n"
    )


def test_validate_defaults_to_the_current_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(SAMPLE)

    result = _invoke("validate")

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(".: valid: ")


def test_validate_json_has_the_documented_keys() -> None:
    result = _invoke("validate", SAMPLE, "--format", "json")

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert {"repo", "valid", "files", "errors"} <= document.keys()
    assert document["repo"] == str(SAMPLE)
    assert document["valid"] is True
    assert document["errors"] == []
    assert document["files"] == SAMPLE_FILES
    assert document["runtimes"] == RUNTIMES == sorted(SAMPLE_RUNS)
    assert document["channels"] == SAMPLE_CHANNELS
    assert {m: sorted(v) for m, v in document["modules"].items()} == SAMPLE_VERSIONS


def _invalid_repo(make_repo: RepoFactory) -> tuple[Path, list[str]]:
    """A repo with three mistakes in three files, and the lines validate must print."""
    files = small_repo()
    runtime = files["runtimes/one.yaml"].replace("channel: regular", "channel: regualr")
    fast = files["channels/fast.yaml"] + "    gamma: 1.0.0\n"
    beta = files["modules/beta/module.yaml"] + "kind: Module\n"
    repo = make_repo(
        {
            **files,
            "runtimes/one.yaml": runtime,
            "channels/fast.yaml": fast,
            "modules/beta/module.yaml": beta,
        }
    )
    channel_at, gamma_at = _where(runtime, "regualr"), _where(fast, "gamma")
    first_kind, second_kind = _where(beta, "kind: Module"), _where(beta, "kind: Module", 2)
    expected = [
        f"{repo}/channels/fast.yaml:{gamma_at[0]}:{gamma_at[1]}: C3 module 'gamma' does not "
        "exist (/spec/modules/gamma)",
        f"{repo}/modules/beta/module.yaml:{second_kind[0]}:{second_kind[1]}: C6 duplicate key "
        f"'kind' (first defined on line {first_kind[0]})",
        f"{repo}/runtimes/one.yaml:{channel_at[0]}:{channel_at[1]}: C2 channel 'regualr' does "
        "not exist; did you mean 'regular'? (/spec/channel)",
    ]
    return repo, expected


def test_validate_invalid_repo_prints_compiler_style_lines(make_repo: RepoFactory) -> None:
    repo, expected = _invalid_repo(make_repo)

    result = _invoke("validate", repo)

    assert result.exit_code == 1
    assert result.stdout.splitlines() == expected
    for line in result.stdout.splitlines():
        assert DIAGNOSTIC.match(line), line
    assert result.stderr == f"{repo}: 3 errors in 3 files\n"


def test_validate_invalid_repo_as_json(make_repo: RepoFactory) -> None:
    repo, expected = _invalid_repo(make_repo)

    result = _invoke("validate", repo, "--format", "json")

    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["valid"] is False
    assert document["kind"] == "Validation"
    assert (document["runtimes"], document["modules"], document["channels"]) == ([], {}, [])
    errors = document["errors"]
    assert [set(e) for e in errors] == [
        {"path", "line", "column", "rule", "message", "pointer"}
    ] * 3
    rebuilt = [
        f"{e['path']}:{e['line']}:{e['column']}: {e['rule']} {e['message']}"
        + (f" ({e['pointer']})" if e["pointer"] else "")
        for e in errors
    ]
    assert rebuilt == expected


def test_validate_missing_folder_exits_2(tmp_path: Path) -> None:
    result = _invoke("validate", tmp_path / "nowhere")

    assert result.exit_code == 2
    assert result.stdout == ""
    assert "nowhere: not a directory" in result.stderr


def test_validate_options_reach_the_loader(make_repo: RepoFactory, tmp_path: Path) -> None:
    repo = make_repo(small_repo())
    override = tmp_path / "override"
    override.mkdir()
    (override / "regular.yaml").write_text(
        channel_file("regular", {"alpha": "1.0.0", "beta": "1.0.0"})["channels/regular.yaml"],
        encoding="utf-8",
    )

    small = _invoke("validate", repo, "--max-file-size", "50")
    only_regular = _invoke("validate", repo, "--channels", override, "--format", "json")

    assert small.exit_code == 1
    assert all(" C6 file is " in line for line in small.stdout.splitlines())
    assert len(small.stdout.splitlines()) == 9  # every file is over 50 bytes
    assert only_regular.exit_code == 0, only_regular.output
    assert json.loads(only_regular.stdout)["channels"] == ["regular"]


def test_validate_never_prints_a_credential(make_repo: RepoFactory) -> None:
    files = small_repo()
    manifest = "modules/alpha/1.0.0/manifest.yaml"
    secret = f"apiVersion: v1\nkind: Secret\nmetadata: {{name: s}}\nstringData: {{pw: {SECRET}}}\n"
    runtime = files["runtimes/one.yaml"].replace("kind: Runtime", f"kind: Runtime\ntoken: {SECRET}")
    repo = make_repo(
        {**files, manifest: secret + "---\n" + files[manifest], "runtimes/one.yaml": runtime}
    )

    for args in (("validate", repo), ("validate", repo, "--format", "json")):
        result = _invoke(*args)
        assert result.exit_code == 1
        assert "C6" in result.stdout
        assert SECRET not in result.output
    rendered = _invoke("render", repo, "--runtime", "one")
    assert rendered.exit_code == 1
    assert SECRET not in rendered.output


def test_validate_survives_a_deeply_nested_file(make_repo: RepoFactory) -> None:
    depth = 100_000
    repo = make_repo({**small_repo(), "runtimes/deep.yaml": "a: " + "[" * depth + "]" * depth})

    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "validate", str(repo)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )

    assert done.returncode == 1, f"exit status {done.returncode}: {done.stderr[-300:]}"
    assert f"{repo}/runtimes/deep.yaml:1:" in done.stdout
    assert " C6 nesting deeper than" in done.stdout


def test_validate_fetches_channels_kept_in_a_git_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    import subprocess

    from tests.support.daemons import GitServer

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


# -- render --------------------------------------------------------------------------------------


def _headers(stdout: str) -> Iterator[tuple[str, str, str]]:
    """(module, version, the rest) of each ``# module`` comment."""
    for line in stdout.splitlines():
        match = re.fullmatch(r"# module (\S+) (\S+): (.*)", line)
        if match:
            yield match.group(1), match.group(2), match.group(3)


def _leaking_fleet(folder: Path, url: str) -> str:
    """The sample repo (with its channels) copied under ``folder``, its overlay's
    configMapGenerator reading ``url``; the overlay's new text."""
    import shutil

    shutil.copytree(ROOT / "channels", folder / "channels")
    shutil.copytree(SAMPLE, folder / "fleet")
    overlay = folder / "fleet" / "modules" / "status-board" / "1.0.0" / "kustomization.yaml"
    leak = f"  - name: leak\n    files:\n      - {url}/secret.txt\n"
    text = overlay.read_text().replace("configMapGenerator:\n", "configMapGenerator:\n" + leak)
    overlay.write_text(text)
    return text


@pytest.mark.parametrize("command", ["render", "validate", "diff --base-path", "diff of the base"])
def test_an_overlay_naming_a_url_is_refused_at_its_line_and_never_asked(
    tmp_path: Path, command: str
) -> None:
    from tests.support.http_fakes import CountingServer

    served = CountingServer(b"internal: secret\n")
    try:
        text = _leaking_fleet(tmp_path, served.url)
        fleet, clean = tmp_path / "fleet", ROOT / "sample-repo"
        args = {
            "render": ("render", fleet, "--runtime", "dev-sandbox", "--module", "status-board"),
            "validate": ("validate", fleet),
            "diff --base-path": ("diff", fleet, "--base-path", clean),
            "diff of the base": ("diff", clean, "--base-path", fleet),
        }[command]
        result = _invoke(*args)
    finally:
        served.close()

    assert served.requests == []
    assert "internal: secret" not in result.output
    assert result.exit_code != 0, result.output
    line, column = _where(text, served.url)
    found = [m for m in map(DIAGNOSTIC.match, result.output.splitlines()) if m is not None]
    assert len(found) == 1, result.output
    assert found[0]["path"].endswith("modules/status-board/1.0.0/kustomization.yaml")
    assert (int(found[0]["line"]), int(found[0]["column"]), found[0]["rule"]) == (
        line,
        column,
        "C6",
    )
    assert found[0]["pointer"] == "/configMapGenerator/0/files/0"


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_render_every_sample_runtime(runtime: str) -> None:
    expected = {module: version for module, (version, _) in SAMPLE_RUNS[runtime].items()}

    result = _invoke("render", SAMPLE, "--runtime", runtime)

    assert result.exit_code == 0, result.output
    objects = [d for d in yaml.safe_load_all(result.stdout) if d is not None]
    assert objects
    seen: dict[str, int] = {}
    for obj in objects:
        metadata = obj["metadata"]
        module = metadata["labels"][LABEL_MODULE]
        assert metadata["labels"][LABEL_MANAGED_BY] == "reconciler"
        assert metadata["labels"][LABEL_RUNTIME] == runtime
        assert metadata["annotations"][ANNOTATION_MODULE_VERSION] == expected[module]
        seen[module] = seen.get(module, 0) + 1
    assert seen == {module: count for module, (_, count) in SAMPLE_RUNS[runtime].items()}
    headers = list(_headers(result.stdout))
    assert {(m, v) for m, v, _ in headers} == set(expected.items())
    assert result.stdout.startswith(f"# runtime {runtime} (channel ")


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_render_puts_dependencies_first_and_defaults_last(runtime: str) -> None:
    result = _invoke("render", SAMPLE, "--runtime", runtime)

    order = [m for m, _, _ in _headers(result.stdout)]

    assert sorted(order) == sorted(SAMPLE_RUNS[runtime])
    for position, name in enumerate(order):
        for dep in SAMPLE_DEPENDS_ON.get(name, []):
            assert order.index(dep) < position
    objects = [d for d in yaml.safe_load_all(result.stdout) if d is not None]
    for module in order:
        mine = [o for o in objects if o["metadata"]["labels"][LABEL_MODULE] == module]
        defaults = [
            i
            for i, o in enumerate(mine)
            if o["metadata"]["annotations"].get(ANNOTATION_DEFAULT_CONFIGURATION) == "true"
        ]
        assert defaults in ([], [len(mine) - 1])


def test_render_heads_modules_with_version_origin_and_strategy() -> None:
    result = _invoke("render", SAMPLE, "--runtime", "prod-us-1")

    headers = {m: (v, rest) for m, v, rest in _headers(result.stdout)}
    assert headers == {
        "api-gateway": ("1.0.0", "channel regular, listed, strategy CreateAndDelete"),
        "eventing": ("1.0.0", "channel regular, listed, strategy CreateAndDelete"),
        "istio": ("1.0.0", "channel regular, mandatory, strategy CreateAndDelete"),
        "keda": ("1.0.0", "channel regular, listed, strategy Ignore"),
        "serverless": ("1.2.0", "pinned, listed, strategy CreateAndDelete"),
    }
    assert "# module serverless 1.2.0: pinned, listed, strategy CreateAndDelete" in result.stdout
    assert "# module keda 1.0.0: channel regular, listed, strategy Ignore" in result.stdout
    assert "# module istio 1.0.0: channel regular, mandatory" in result.stdout


def test_render_one_module() -> None:
    result = _invoke("render", SAMPLE, "--runtime", "prod-eu-1", "--module", "istio")

    assert result.exit_code == 0, result.output
    objects = [d for d in yaml.safe_load_all(result.stdout) if d is not None]
    assert {o["metadata"]["labels"][LABEL_MODULE] for o in objects} == {"istio"}
    assert [m for m, _, _ in _headers(result.stdout)] == ["istio"]


def test_render_one_module_shows_its_module_channel() -> None:
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


def test_render_unknown_runtime_suggests_a_name() -> None:
    result = _invoke("render", SAMPLE, "--runtime", "prod-us-2")

    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        "error: runtime 'prod-us-2' does not exist; did you mean 'prod-us-1'?\n"
    )


def test_render_a_module_the_runtime_does_not_run() -> None:
    result = _invoke("render", SAMPLE, "--runtime", "control-plane", "--module", "kdea")

    assert result.exit_code == 2
    assert "runtime 'control-plane' does not run module 'kdea'" in result.stderr


def test_render_invalid_repo_prints_errors_and_nothing_else(make_repo: RepoFactory) -> None:
    repo, expected = _invalid_repo(make_repo)

    result = _invoke("render", repo, "--runtime", "one")

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.splitlines()[:-1] == expected
    assert "nothing done" in result.stderr.splitlines()[-1]


def test_render_requires_a_runtime() -> None:
    result = _invoke("render", SAMPLE)

    assert result.exit_code == 2
    assert "--runtime" in result.stderr


def test_render_objects_with_empty_labels(make_repo: RepoFactory) -> None:
    config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  labels:\n"
    files = {
        **module_files("solo"),
        **channel_file("regular", {"solo": "1.0.0"}),
        **runtime_file("one", "regular", [{"name": "solo"}]),
    }
    manifest = "modules/solo/1.0.0/manifest.yaml"
    repo = make_repo({**files, manifest: config_map + "---\n" + files[manifest]})
    assert _exit_code("validate", repo) == 0

    assert _exit_code("render", repo, "--runtime", "one") == 0


# -- exit codes through main() -------------------------------------------------------------------


def test_main_exit_codes(make_repo: RepoFactory, tmp_path: Path) -> None:
    invalid, _ = _invalid_repo(make_repo)

    assert _exit_code("validate", SAMPLE) == 0
    assert _exit_code("validate", invalid) == 1
    assert _exit_code("validate", tmp_path / "nowhere") == 2
    assert _exit_code("validate", SAMPLE, "--format", "csv") == 2
    assert _exit_code("validate", "--format", "xml", SAMPLE) == 2  # options before the path
    assert _exit_code("validate", ROOT / "tests" / "support" / "fixtures" / "broken-repo") == 1
    assert _exit_code("render", SAMPLE) == 2  # --runtime is required
    assert _exit_code("render", SAMPLE, "--runtime", RUNTIMES[0]) == 0
    assert _exit_code("render", invalid, "--runtime", "one") == 1
    assert _exit_code("render", SAMPLE, "--runtime", "nope") == 2
    assert _exit_code("no-such-command") == 2


# -- version and help ----------------------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_code("--version") == 0
    assert capsys.readouterr().out == f"reconciler, version {__version__}\n"


def _commands(group: click.Group, path: Sequence[str] = ()) -> Iterator[tuple[list[str], Any]]:
    context = click.Context(group)
    for name in group.list_commands(context):  # the root group imports its commands when asked
        command = group.get_command(context, name)
        yield [*path, name], command
        if isinstance(command, click.Group):
            yield from _commands(command, [*path, name])


COMMANDS: Mapping[str, Any] = {" ".join(path): command for path, command in _commands(cli)}


def test_the_documented_commands_exist() -> None:
    assert {"validate", "render", "diff", "sync", "status", "operations list"} <= COMMANDS.keys()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_of_every_command_mentions_its_options(name: str) -> None:
    command = COMMANDS[name]

    result = _invoke(*name.split(), "--help")

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"Usage: cli {name} ")
    for parameter in command.params:
        if isinstance(parameter, click.Option) and not parameter.hidden:
            for option in [*parameter.opts, *parameter.secondary_opts]:
                assert option in result.stdout, f"{name} --help does not mention {option}"
    assert "-h, --help" in result.stdout


def test_top_level_help_lists_the_commands() -> None:
    result = _invoke("--help")

    assert result.exit_code == 0
    for name, _ in _commands(cli):
        if len(name) == 1:
            assert name[0] in result.stdout
