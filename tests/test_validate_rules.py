"""Acceptance: a repo with one mistake of each kind (C1-C6) gives one error per mistake.

The fixture `tests/fixtures/broken-repo` holds the mistakes that can live in git; the test copies
it and adds the file-level ones (a symlink out of the repo, a non-UTF-8 file, an oversized file,
an alias bomb). Every mistake must be reported exactly once, with the right file, line, column
and rule, in a single run of `reconciler validate`, which exits 1.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli

FIXTURE = Path(__file__).parent / "fixtures" / "broken-repo"


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
