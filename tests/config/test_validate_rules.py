"""Acceptance: a repo with one mistake of each kind (C1-C6) gives one error per mistake.

The fixture `tests/support/fixtures/broken-repo` holds the mistakes that can live in git; the test
copies it and adds the file-level ones (a symlink out of the repo, a non-UTF-8 file, an oversized
file, an alias bomb). Every mistake must be reported exactly once, with the right file, line, column
and rule, in a single run of `reconciler validate`, which exits 1.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.source.loader import load_repo

FIXTURE = Path(__file__).parents[1] / "support" / "fixtures" / "broken-repo"


def _level(i: int) -> str:
    """Line ``i`` of the bomb: an anchor holding ten aliases of the previous one."""
    this, previous = chr(98 + i), chr(97 + i)
    return f"{this}: &{this} [{', '.join([f'*{previous}'] * 10)}]"


BILLION_LAUGHS = "\n".join(
    [
        "apiVersion: reconciler.dev/v1alpha1",
        "kind: Channel",
        "metadata: {name: bomb}",
        "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]",
        *(_level(i) for i in range(8)),
        "spec: {modules: {alpha: 1.0.0}}",
    ]
)

# (file, line, column, rule, a fragment of the message): one entry per planted mistake.
EXPECTED = [
    ("channels/bomb.yaml", 9, 1, "C6", "more than 1,000,000 nodes"),
    ("channels/regular.yaml", 8, 5, "C3", "module 'beta' has no version 2.0.0"),
    ("modules/alpha/latest", 1, 1, "C4", "'latest' is not a semantic version"),
    ("modules/beta/1.0.0/manifest.yaml", 42, 3, "C6", "Secret with inline stringData"),
    ("modules/cyc-a/module.yaml", 8, 15, "C5", "dependency cycle: cyc-a -> cyc-b -> cyc-a"),
    ("modules/gamma/module.yaml", 8, 22, "C5", "dependsOn names module 'delta'"),
    ("runtimes/big.yaml", 1, 1, "C6", "over the 5.0 MiB limit"),
    ("runtimes/dev.yaml", 10, 7, "C1", "unknown field 'strategie'; did you mean 'strategy'?"),
    ("runtimes/edge.yaml", 9, 13, "C2", "module 'alpah' does not exist; did you mean 'alpha'?"),
    ("runtimes/edge.yaml", 11, 16, "C2", "module 'beta' has no version 9.9.9"),
    ("runtimes/latin1.yaml", 4, 12, "C6", "not UTF-8: byte 0xe9"),
    ("runtimes/outside.yaml", 1, 1, "C6", "symbolic link pointing outside the repo"),
    ("runtimes/prod.yaml", 4, 9, "C4", "'production' must equal the file name 'prod'"),
    ("runtimes/qa.yaml", 12, 3, "C6", "duplicate key 'channel' (first defined on line 6)"),
    ("runtimes/staging.yaml", 6, 12, "C2", "channel 'fsat' does not exist; did you mean 'fast'?"),
]


@pytest.fixture
def broken_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo)
    secret = tmp_path / "elsewhere.yaml"
    secret.write_text("apiVersion: reconciler.dev/v1alpha1\nkind: Runtime\n", encoding="utf-8")
    (repo / "runtimes" / "outside.yaml").symlink_to(secret)
    latin1 = "apiVersion: reconciler.dev/v1alpha1\nkind: Runtime\nmetadata:\n  name: caf\xe9\n"
    (repo / "runtimes" / "latin1.yaml").write_bytes(latin1.encode("latin-1"))
    (repo / "runtimes" / "big.yaml").write_bytes(b"# " + b"x" * (5 * 1024 * 1024) + b"\n")
    (repo / "channels" / "bomb.yaml").write_text(BILLION_LAUGHS + "\n", encoding="utf-8")
    return repo


def test_every_mistake_is_reported_once_with_its_place(broken_repo: Path) -> None:
    result = CliRunner().invoke(cli, ["validate", str(broken_repo), "--format", "json"])

    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    found = [
        (Path(e["path"]).relative_to(broken_repo).as_posix(), e["line"], e["column"], e["rule"])
        for e in report["errors"]
    ]
    assert found == [entry[:4] for entry in EXPECTED]
    for error, (*_, fragment) in zip(report["errors"], EXPECTED, strict=True):
        assert fragment in error["message"]


def test_text_output_is_compiler_style_and_sorted(broken_repo: Path) -> None:
    result = CliRunner().invoke(cli, ["validate", str(broken_repo)])

    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == len(EXPECTED)
    assert lines == sorted(lines, key=lambda line: _place(line, broken_repo))
    first = lines[0]
    assert first.startswith(f"{broken_repo}/channels/bomb.yaml:9:1: C6 ")
    staging = next(line for line in lines if "staging.yaml" in line)
    assert staging.endswith("did you mean 'fast'? (/spec/channel)")
    assert f"{len(EXPECTED)} errors in 14 files" in result.stderr


def test_credential_values_never_appear_in_messages(broken_repo: Path) -> None:
    result = CliRunner().invoke(cli, ["validate", str(broken_repo)])

    assert "robot" not in result.output  # the Secret's stringData value


def test_the_fixture_without_file_level_mistakes_has_only_its_own_errors() -> None:
    result = CliRunner().invoke(cli, ["validate", str(FIXTURE), "--format", "json"])

    assert result.exit_code == 1
    rules = sorted(e["rule"] for e in json.loads(result.stdout)["errors"])
    assert rules == ["C1", "C2", "C2", "C2", "C3", "C4", "C4", "C5", "C5", "C6", "C6"]


def _place(line: str, repo: Path) -> tuple[str, int, int]:
    path, row, column, _ = line.split(":", 3)
    return path, int(row), int(column)


# -- single rules on small repos ----------------------------------------------------------------

MODULE = """\
apiVersion: reconciler.dev/v1alpha1
kind: Module
metadata: {name: alpha}
spec:
  namespace: example-system
  operator: {kind: Deployment, name: alpha-operator}
"""
MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: alpha-operator, labels: {app.kubernetes.io/version: "1.0.0"}}
"""
CHANNEL = """\
apiVersion: reconciler.dev/v1alpha1
kind: Channel
metadata: {name: regular}
spec: {modules: {alpha: 1.0.0}}
"""
RUNTIME_TEMPLATE = """\
apiVersion: reconciler.dev/v1alpha1
kind: Runtime
metadata: {{name: {name}}}
spec:
  channel: regular
  cluster: {{context: c}}
  modules: [{{name: alpha}}]
"""


def _write_repo(root: Path, files: dict[str, str]) -> Path:
    base = {
        "modules/alpha/module.yaml": MODULE,
        "modules/alpha/1.0.0/manifest.yaml": MANIFEST,
        "channels/regular.yaml": CHANNEL,
        "runtimes/one.yaml": RUNTIME_TEMPLATE.format(name="one"),
        "runtimes/two.yaml": RUNTIME_TEMPLATE.format(name="two"),
    }
    for relative, text in {**base, **files}.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _errors(root: Path) -> list[str]:
    validation = load_repo(root)
    return [
        f"{Path(d.path).relative_to(root)}:{d.line} {d.rule} {d.message}"
        for d in validation.diagnostics
    ]


def test_the_small_repo_is_valid(tmp_path: Path) -> None:
    validation = load_repo(_write_repo(tmp_path, {}))

    assert validation.valid
    assert validation.repo is not None
    assert sorted(validation.repo.runtimes) == ["one", "two"]


def test_one_invalid_file_refuses_the_whole_repo(tmp_path: Path) -> None:
    """C7: a repo is accepted or refused as a whole; no partial ConfigRepo."""
    broken = RUNTIME_TEMPLATE.format(name="two").replace("channel: regular", "channel: 7")
    validation = load_repo(_write_repo(tmp_path, {"runtimes/two.yaml": broken}))

    assert not validation.valid
    assert validation.repo is None
    assert len(validation.diagnostics) == 1


def test_broken_module_file_does_not_cascade_into_runtimes(tmp_path: Path) -> None:
    files = {"modules/alpha/module.yaml": MODULE.replace("namespace:", "namespaec:")}

    errors = _errors(_write_repo(tmp_path, files))

    assert errors == [
        "modules/alpha/module.yaml:5 C1 unknown field 'namespaec'; did you mean 'namespace'? "
        "(a required field)"
    ]


def test_broken_channel_file_does_not_cascade_into_runtimes(tmp_path: Path) -> None:
    files = {"channels/regular.yaml": CHANNEL.replace("modules:", "mods:")}

    errors = _errors(_write_repo(tmp_path, files))

    assert errors == [
        "channels/regular.yaml:4 C1 unknown field 'mods'; did you mean 'modules'? "
        "(a required field)"
    ]


def test_unparsable_runtime_reports_only_the_parse_error(tmp_path: Path) -> None:
    errors = _errors(_write_repo(tmp_path, {"runtimes/two.yaml": "spec: [unclosed\n"}))

    assert len(errors) == 1
    assert errors[0].startswith("runtimes/two.yaml:2 C6 invalid YAML")


def test_operator_missing_from_a_manifest(tmp_path: Path) -> None:
    other = MANIFEST.replace("alpha-operator", "alpha-controller")
    files = {"modules/alpha/1.0.0/manifest.yaml": other}

    errors = _errors(_write_repo(tmp_path, files))

    assert errors == [
        "modules/alpha/module.yaml:6 C2 the manifest of version 1.0.0 has no Deployment "
        "'alpha-operator' (the module's operator)"
    ]


def test_version_metadata_without_folder(tmp_path: Path) -> None:
    module = MODULE + "  versions: {1.1.0: {requiresDowntime: true}}\n"

    errors = _errors(_write_repo(tmp_path, {"modules/alpha/module.yaml": module}))

    assert errors == [
        "modules/alpha/module.yaml:7 C4 version 1.1.0 has no folder; did you mean '1.0.0'?"
    ]


def test_version_folder_without_manifest(tmp_path: Path) -> None:
    root = _write_repo(tmp_path, {})
    (root / "modules/alpha/2.0.0").mkdir()

    assert _errors(root) == [
        "modules/alpha/2.0.0/manifest.yaml:1 C2 version folder has no manifest.yaml"
    ]


def test_dependency_without_version_in_the_runtime_channel(tmp_path: Path) -> None:
    beta = MODULE.replace("name: alpha", "name: beta") + "  dependsOn: [alpha]\n"
    channel = CHANNEL.replace("{alpha: 1.0.0}", "{beta: 1.0.0}")
    runtime = RUNTIME_TEMPLATE.format(name="one").replace("{name: alpha}", "{name: beta}")
    files = {
        "modules/beta/module.yaml": beta,
        "modules/beta/1.0.0/manifest.yaml": MANIFEST.replace("alpha", "beta"),
        "channels/regular.yaml": channel,
        "runtimes/one.yaml": runtime,
        "runtimes/two.yaml": runtime.replace("name: one", "name: two"),
    }

    errors = _errors(_write_repo(tmp_path, files))

    assert errors == [
        f"runtimes/{name}.yaml:5 C2 channel 'regular' serves no version of module 'alpha' "
        "(a dependency of beta); pin a version or choose a channel that serves it"
        for name in ("one", "two")
    ]


def test_module_listed_twice(tmp_path: Path) -> None:
    runtime = RUNTIME_TEMPLATE.format(name="one").replace(
        "[{name: alpha}]", "\n    - name: alpha\n    - name: alpha\n      strategy: Ignore"
    )

    errors = _errors(_write_repo(tmp_path, {"runtimes/one.yaml": runtime}))

    assert errors == ["runtimes/one.yaml:9 C4 module 'alpha' is listed twice (first on line 8)"]


def test_maintenance_window_checks(tmp_path: Path) -> None:
    window = (
        "  maintenanceWindow: "
        "{days: [Sat], start: '02:00', duration: 25h, timezone: Europe/Berln}\n"
    )
    runtime = RUNTIME_TEMPLATE.format(name="one") + window

    errors = _errors(_write_repo(tmp_path, {"runtimes/one.yaml": runtime}))

    assert errors == [
        "runtimes/one.yaml:8 C1 duration must be more than 0 and at most 24h",
        "runtimes/one.yaml:8 C1 timezone is not a known IANA time zone; "
        "did you mean 'Europe/Berlin'?",
    ]


def test_inline_kubeconfig_in_a_runtime_is_a_credential_error_not_an_unknown_field(
    tmp_path: Path,
) -> None:
    runtime = RUNTIME_TEMPLATE.format(name="one").replace(
        "{context: c}", "\n    token: abcdef0123456789"
    )

    errors = _errors(_write_repo(tmp_path, {"runtimes/one.yaml": runtime}))

    assert len(errors) == 1
    assert errors[0].startswith("runtimes/one.yaml:7 C6 inline credential 'token'")
    assert "abcdef0123456789" not in errors[0]


def test_a_module_with_a_schema_error_still_shows_its_dependency_cycle(tmp_path: Path) -> None:
    """Validation stays whole: the unknown field and the cycle are reported in one run, not
    the cycle only after the first fix."""
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo)
    module = repo / "modules" / "cyc-a" / "module.yaml"
    module.write_text(module.read_text().replace("spec:\n", "spec:\n  bogus: 1\n"))

    rules = {(d.path.rsplit("/", 3)[-2], d.rule) for d in load_repo(repo).diagnostics}

    assert {("cyc-a", "C1"), ("cyc-a", "C5")} <= rules


# -- healthChecks: objects of the version whose health counts (spec.versions.<v>.healthChecks) --

JOB = "---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: migrate}\n"
DEFAULT = "apiVersion: alpha.example.io/v1\nkind: Alpha\nmetadata: {name: default}\n"


def _with_checks(tmp_path: Path, checks: str, manifest: str = MANIFEST + JOB) -> list[str]:
    module = MODULE + f"  versions:\n    1.0.0:\n      healthChecks: {checks}\n"
    files = {
        "modules/alpha/module.yaml": module,
        "modules/alpha/1.0.0/manifest.yaml": manifest,
        "modules/alpha/1.0.0/default.yaml": DEFAULT,
    }
    return _errors(_write_repo(tmp_path, files))


def test_health_checks_name_objects_of_the_manifest_or_the_default_configuration(
    tmp_path: Path,
) -> None:
    checks = "[{kind: Job, name: migrate, group: batch}, {kind: Alpha, name: default}]"

    assert _with_checks(tmp_path, checks) == []
    validation = load_repo(tmp_path)
    assert validation.repo is not None
    named = validation.repo.modules["alpha"].versions["1.0.0"].health_checks
    assert [(c.kind, c.name, c.group) for c in named] == [
        ("Job", "migrate", "batch"),
        ("Alpha", "default", None),
    ]


def test_a_health_check_naming_no_object_of_the_version_is_refused(tmp_path: Path) -> None:
    errors = _with_checks(tmp_path, "[{kind: Job, name: migrat}]")

    assert errors == [
        "modules/alpha/module.yaml:9 C2 health check Job/migrat names no object of version "
        "1.0.0 (its manifest or default configuration); did you mean 'migrate'?"
    ]


def test_a_health_check_naming_two_objects_asks_for_their_namespace(tmp_path: Path) -> None:
    other = JOB.replace("{name: migrate}", "{name: migrate, namespace: other}")

    errors = _with_checks(tmp_path, "[{kind: Job, name: migrate}]", MANIFEST + JOB + other)

    assert errors == [
        "modules/alpha/module.yaml:9 C2 health check Job/migrate names 2 objects of version "
        "1.0.0 (Job/example-system/migrate, Job/other/migrate): give its namespace or group"
    ]
    named = "[{kind: Job, name: migrate, namespace: other}]"
    assert _with_checks(tmp_path, named, MANIFEST + JOB + other) == []


@pytest.mark.parametrize(
    ("checks", "message"),
    [
        ("[{kind: Job}]", "missing required field 'name'"),
        ("[{kind: Job, name: migrate, apiVersion: batch/v1}]", "unknown field 'apiVersion'"),
        ("[Job/migrate]", "must be a mapping, not a string"),
        ("{kind: Job, name: migrate}", "must be a list, not a mapping"),
    ],
)
def test_a_health_check_of_an_unsupported_shape_is_refused(
    tmp_path: Path, checks: str, message: str
) -> None:
    assert _with_checks(tmp_path, checks) == [f"modules/alpha/module.yaml:9 C1 {message}"]
