"""The command line as a package: exit statuses named per command and shown in each command's help,
options that agree with the loader, and the work ``diff --base`` no longer does twice (a document
both revisions share is checked once; a revision's files come from git in one batch)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from reconciler.cli import cli, exits, options
from reconciler.source import git as git_source
from reconciler.source import gittree
from reconciler.source.loader import DEFAULT_MAX_FILE_SIZE, ReadOptions

ROOT = Path(__file__).parents[2]

#: Each command and the exit statuses its help must list.
DOCUMENTED = {
    "validate": [exits.VALIDATE],
    "render": [exits.RENDER],
    "diff": [exits.LIVE_DIFF, exits.FLEET_DIFF],
    "sync": [exits.SYNC],
    "status": [exits.RECORDS],
    "operations list": [exits.RECORDS],
    "operations show": [exits.RECORDS],
    "operations retrigger": [exits.RETRIGGER],
    "operations prune": [exits.PRUNE],
    "daemon": [exits.DAEMON],
    "completion": [exits.COMPLETION],
    "version": [exits.VERSION],
    "suspend": [exits.SUSPEND],
    "resume": [exits.SUSPEND],
    "reconcile": [exits.RECONCILE],
    "get runtimes": [exits.RECORDS],
    "get modules": [exits.RECORDS],
    "get operations": [exits.RECORDS],
    "tree": [exits.TREE],
    "check": [exits.CHECK],
    "rbac": [exits.RBAC],
    "members": [exits.RECORDS],
    **{f"rollout {name}": [exits.RECORDS] for name in ("list", "show")},
    **{f"rollout {n}": [exits.RECORDS] for n in ("pause", "resume", "cancel", "promote")},
}


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_each_command_help_lists_its_exit_statuses(name: str) -> None:
    result = CliRunner().invoke(cli, [*name.split(), "--help"], terminal_width=400)

    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    for statuses in DOCUMENTED[name]:
        assert statuses.describe() in flat
        for code, _ in statuses.meanings:
            assert code in (
                exits.OK,
                exits.CONFIG_INVALID,
                exits.USAGE,
                exits.HELD,
                exits.INTERRUPTED,
            )


def test_every_command_is_documented() -> None:
    names = set()
    context = click.Context(cli)
    for name in cli.list_commands(context):  # imports each command's module
        command = cli.get_command(context, name)
        if isinstance(command, click.Group):
            names |= {f"{name} {sub}" for sub in command.commands}
        else:
            names.add(name)
    assert names == set(DOCUMENTED)


def test_exit_values_stay_what_scripts_rely_on() -> None:
    assert (exits.OK, exits.USAGE, exits.HELD, exits.INTERRUPTED) == (0, 2, 3, 130)
    assert exits.VALIDATE_INVALID == exits.DIFF_CHANGES == exits.SYNC_FAILED == 1
    assert exits.CHECK_FAILED == 1
    assert exits.CONFIG_INVALID == 1


def test_the_size_limit_option_defaults_to_the_loaders_limit() -> None:
    assert options.DEFAULT_MAX_FILE_SIZE == DEFAULT_MAX_FILE_SIZE == ReadOptions().max_file_size


def _git(root: Path, *args: str) -> None:
    git = ["git", "-c", "user.email=t@example.io", "-c", "user.name=t"]
    subprocess.run([*git, *args], cwd=root, check=True, capture_output=True)


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """A generated fleet committed to git, with one channel bumped in the working tree."""
    from tests.support.fleet_generator import generate_fleet

    generate_fleet(tmp_path, runtimes=60, modules=5, versions=2)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "fleet")
    channel = tmp_path / "channels" / "regular.yaml"
    channel.write_text(channel.read_text().replace("mod-03: 1.0.0", "mod-03: 1.1.0"))
    return tmp_path


def test_documents_both_revisions_share_are_checked_once(fleet: Path) -> None:
    from reconciler.review.fleet import Review, Side

    alone = Review(ReadOptions())
    alone.load(Side(fleet, "HEAD"), "base")
    review = Review(ReadOptions())
    review.load(Side(fleet, "HEAD"), "base")
    review.load(Side(fleet), "head")

    assert alone.memo.checked > 60
    assert review.memo.checked == alone.memo.checked + 1  # the bumped channel alone


def test_a_revision_reads_its_files_from_git_in_one_batch(
    fleet: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches: list[int] = []
    read_blobs = gittree._read_blobs

    def counted(git_dir: str, ids: list[str]) -> dict[str, bytes]:
        batches.append(len(ids))
        return read_blobs(git_dir, ids)

    monkeypatch.setattr(gittree, "_read_blobs", counted)
    revision = git_source.open_revision(fleet, "HEAD")
    files = sorted(p for p in fleet.rglob("*.yaml") if ".git" not in p.parts)
    for path in files:
        text = path.read_bytes()
        if path.name != "regular.yaml":
            assert revision.tree.read(path.relative_to(fleet).as_posix()) == text

    listing = subprocess.run(
        ["git", "ls-tree", "-r", "HEAD"], cwd=fleet, capture_output=True, text=True, check=True
    ).stdout
    blobs = {line.split()[2] for line in listing.splitlines() if line.endswith(".yaml")}
    assert batches == [len(blobs)]  # every YAML blob, identical files once


def test_a_pull_requests_base_reads_from_git_only_the_blobs_the_head_lacks(
    fleet: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reconciler.review.fleet import Review, Side

    batches: list[list[str]] = []
    read_blobs = gittree._read_blobs

    def counted(git_dir: str, ids: list[str]) -> dict[str, bytes]:
        batches.append(list(ids))
        return read_blobs(git_dir, ids)

    monkeypatch.setattr(gittree, "_read_blobs", counted)
    review = Review(ReadOptions())
    base, head = review.load_both(Side(fleet, "HEAD"), Side(fleet))

    changed = subprocess.run(
        ["git", "rev-parse", "HEAD:channels/regular.yaml"],
        cwd=fleet,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert batches == [[changed]]  # the head (the working tree) has every other blob parsed
    files = [p for p in fleet.rglob("*.yaml") if ".git" not in p.parts]
    assert len(review.cache) == len(files) + 1  # each distinct blob parsed once
    assert base[0].channels["regular"] != head[0].channels["regular"]


def test_files_outside_the_folder_and_twins_are_read_too(tmp_path: Path) -> None:
    (tmp_path / "repo" / "runtimes").mkdir(parents=True)
    (tmp_path / "channels").mkdir()
    (tmp_path / "repo" / "runtimes" / "a.yaml").write_text("same: 1\n")
    (tmp_path / "repo" / "runtimes" / "b.yaml").write_text("same: 1\n")
    (tmp_path / "repo" / "notes.txt").write_text("not yaml\n")
    (tmp_path / "channels" / "regular.yaml").write_text("outside: 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "files")

    tree = git_source.open_revision(tmp_path / "repo", "HEAD").tree

    assert tree.read("runtimes/a.yaml") == tree.read("runtimes/b.yaml") == b"same: 1\n"
    assert tree.size("runtimes/b.yaml") == 8
    assert tree.read("../channels/regular.yaml") == b"outside: 1\n"
    assert tree.read("notes.txt") == b"not yaml\n"
