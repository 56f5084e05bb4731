"""Hostile trees in a commit, read from git as the daemon and ``diff --base`` read them (issue 23).

A blob over the file-size limit is refused from its header, never read (a ``git`` wrapper first
on ``PATH`` records every object id asked of ``git cat-file --batch``, the only way git hands
out content).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler.source.git import PREFETCH_BLOB_BYTES, open_revision
from reconciler.source.loader import ReadOptions, load_repo
from tests.test_fleet_diff import BASE_FILES, _git, _runtime, _write

MIB = 1 << 20


def _repo(root: Path) -> Path:
    """A git repository holding the fleet of ``BASE_FILES``, committed."""
    _write(root, dict(BASE_FILES))
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    return root


def _add_blob(root: Path, path: str, data: bytes, mode: str = "100644") -> str:
    """Commit ``data`` at ``path`` without writing it to the working tree; the blob's id."""
    done = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=root, input=data, capture_output=True
    )
    blob = done.stdout.decode().strip()
    _git(root, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}")
    _git(root, "commit", "-qm", f"add {path}")
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
    text = _runtime("d", "regular", "[{name: widget}]") + padding * (PREFETCH_BLOB_BYTES // 80)
    large = _add_blob(root, "fleet/runtimes/d.yaml", text.encode())
    assert len(text) > PREFETCH_BLOB_BYTES

    assert _errors(root) == []
    assert asked.read_text().count(large) == 1
