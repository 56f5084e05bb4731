"""Hostile trees in a commit, read from git as the daemon and ``diff --base`` read them.

A blob over the file-size limit is refused from its header, never read (a ``git`` wrapper first
on ``PATH`` records every object id asked of ``git cat-file --batch``, the only way git hands
out content); a symbolic link target longer than any real one is not read either. A link out
of the repository gets the same verdict in a commit and in its checkout; a git submodule is
one diagnostic, not a crash.
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from reconciler.errors import SourceError
from reconciler.source.git import open_revision
from reconciler.source.gittree import PREFETCH_BLOB_BYTES
from reconciler.source.loader import ReadOptions, load_repo
from tests.support.fleet_history import BASE_FILES, git, runtime_yaml, write_tree

MIB = 1 << 20
MANIFEST = "fleet/modules/widget/1.0.0/manifest.yaml"


def _repo(root: Path) -> Path:
    """A git repository holding the fleet of ``BASE_FILES``, committed."""
    write_tree(root, dict(BASE_FILES))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


def _add_blob(root: Path, path: str, data: bytes, mode: str = "100644") -> str:
    """Commit ``data`` at ``path`` without writing it to the working tree; the blob's id."""
    done = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=root, input=data, capture_output=True
    )
    blob = done.stdout.decode().strip()
    git(root, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}")
    git(root, "commit", "-qm", f"add {path}")
    return blob


@pytest.fixture
def asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A log of every object id given to ``git cat-file --batch`` (not ``--batch-check``, which
    reads headers only) by this process from now on."""
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "cat-file.log"
    log.touch()
    real = shutil.which("git")
    wrapper = folder / "git"
    wrapper.write_text(
        "#!/bin/sh\n"
        'case " $* " in\n'
        f'  *" cat-file --batch "*) tee -a "{log}" | exec "{real}" "$@" ;;\n'
        f'  *) exec "{real}" "$@" ;;\n'
        "esac\n"
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return log


def _errors(root: Path, options: ReadOptions | None = None) -> list[str]:
    revision = open_revision(root / "fleet", "HEAD")
    validation = load_repo("fleet", options, tree=revision.tree)
    return [d.format() for d in validation.diagnostics]


def test_a_blob_over_the_size_limit_is_refused_from_its_header(tmp_path: Path, asked: Path) -> None:
    root = _repo(tmp_path / "repo")
    big = _add_blob(root, "fleet/runtimes/big.yaml", bytes(6 * MIB))

    errors = _errors(root)

    assert errors == [
        "fleet/runtimes/big.yaml:1:1: C6 file is 6.0 MiB, over the 5.0 MiB limit (--max-file-size)"
    ]
    assert big not in asked.read_text()
    assert asked.read_text()  # the other files were read through the wrapper


def test_a_file_too_large_to_read_ahead_is_read_on_its_own(tmp_path: Path, asked: Path) -> None:
    root = _repo(tmp_path / "repo")
    padding = "# " + "x" * 78 + "\n"
    text = runtime_yaml("d", "regular", "[{name: widget}]") + padding * (PREFETCH_BLOB_BYTES // 80)
    large = _add_blob(root, "fleet/runtimes/d.yaml", text.encode())
    assert len(text) > PREFETCH_BLOB_BYTES

    assert _errors(root) == []
    assert asked.read_text().count(large) == 1


def test_a_link_target_longer_than_any_path_is_not_read(tmp_path: Path, asked: Path) -> None:
    root = _repo(tmp_path / "repo")
    link = _add_blob(root, "fleet/modules/evil", b"x" * (2 * MIB), mode="120000")

    errors = _errors(root)

    assert errors == ["fleet/modules/evil:1:1: C6 symbolic link pointing outside the repo"]
    assert link not in asked.read_text()


def _both_ways(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """The diagnostics of the commit (read from git) and of its checkout (read from disk)."""
    git(root, "add", "-A")
    git(root, "commit", "-qm", "links")
    monkeypatch.chdir(root)
    checkout = [d.format() for d in load_repo("fleet").diagnostics]
    return _errors(root), checkout


LINKS = {
    "an absolute link to a folder": ("fleet/modules/evil", "/etc"),
    "a module folder": ("fleet/modules/evil", "../../../outside/modules/gamma"),
    "a version folder": ("fleet/modules/widget/3.0.0", "../../../../outside/modules/gamma/1.0.0"),
    "the runtimes folder": ("fleet/runtimes", "../../outside/runtimes"),
    "a link to nothing": ("fleet/modules/gone", "../../../nowhere"),
}


@pytest.mark.parametrize(("link", "target"), LINKS.values(), ids=LINKS.keys())
def test_a_link_out_of_the_repo_is_refused_in_a_commit_as_in_a_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, link: str, target: str
) -> None:
    root = _repo(tmp_path / "repo")
    outside = tmp_path / "outside"
    write_tree(outside, {"modules/gamma/1.0.0/manifest.yaml": BASE_FILES[MANIFEST]})
    write_tree(outside, {"runtimes/a.yaml": BASE_FILES["fleet/runtimes/a.yaml"]})
    if link == "fleet/runtimes":
        shutil.rmtree(root / link)
    (root / link).symlink_to(target)

    in_git, on_disk = _both_ways(root, monkeypatch)

    assert in_git == [f"{link}:1:1: C6 symbolic link pointing outside the repo"]
    assert on_disk == in_git


SUBMODULE = "C6 git submodule: its files are not in this commit (keep them in the repo)"


@pytest.mark.parametrize("path", ["fleet/modules/widget/sub", "fleet/runtimes/sub"])
def test_a_submodule_without_gitmodules_is_one_diagnostic(tmp_path: Path, path: str) -> None:
    root = _repo(tmp_path / "repo")
    git(root, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},{path}")
    git(root, "commit", "-qm", "gitlink")

    assert _errors(root) == [f"{path}:1:1: {SUBMODULE}"]

    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "diff", "fleet", "--base", "HEAD~1", "--head", "HEAD"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert f"{path}:1:1: {SUBMODULE}" in done.stderr
    assert "internal error" not in done.stderr


@pytest.fixture
def git_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A log of the arguments of every git command this process runs from now on."""
    folder = tmp_path / "calls-bin"
    folder.mkdir()
    log = tmp_path / "git-calls.log"
    log.touch()
    wrapper = folder / "git"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{shutil.which("git")}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return log


def test_the_folder_of_a_revision_is_listed_once_by_path_as_it_is_opened(
    tmp_path: Path, git_calls: Path
) -> None:
    """``open_revision`` starts the one recursive listing of the config repo's folder at once
    (git works while the caller reads the other side), by ``<commit>:<folder>``, and the read
    takes that listing (the folders above it are listed only for the channels beside it)."""
    root = _repo(tmp_path / "repo")
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()

    revision = open_revision(root / "fleet", "HEAD")
    validation = load_repo("fleet", None, tree=revision.tree)

    assert validation.repo is not None, [d.format() for d in validation.diagnostics]
    calls = git_calls.read_text().splitlines()
    recursive = [line for line in calls if " ls-tree " in line and " -r " in line]
    assert [line.rsplit(" ", 1)[-1] for line in recursive] == [f"{commit}:fleet"]


def test_a_revision_without_the_folder_is_refused_as_before(tmp_path: Path) -> None:
    """The listing started ahead fails (no such folder at that commit): the tree is read the
    usual way, which says what is wrong."""
    root = _repo(tmp_path / "repo")
    git(root, "mv", "fleet", "elsewhere")
    git(root, "commit", "-qm", "moved")
    (root / "fleet").mkdir()

    revision = open_revision(root / "fleet", "HEAD")

    with pytest.raises(SourceError, match="not a config repo: no runtimes/ folder"):
        load_repo("fleet", None, tree=revision.tree)


def test_a_revision_opened_and_never_read_leaves_no_process_behind(tmp_path: Path) -> None:
    """The caller fails before reading the base (a broken head): the listing started ahead is
    ended with the tree, its pipe closed and git reaped, without a warning."""
    root = _repo(tmp_path / "repo")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        revision = open_revision(root / "fleet", "HEAD")
        del revision
        gc.collect()

    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
