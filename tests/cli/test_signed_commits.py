"""``validate --verify`` and ``diff --base --verify``: the same signature check the daemon makes,
on real git histories signed with keys made here (ssh-keygen, gpg)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from reconciler.cli import cli
from tests.support.fleet_history import BASE_FILES, channel_yaml, write_tree
from tests.support.sample_fleet import check_document
from tests.support.signing import Keys, SshKey, git, keys, signed_commit

__all__ = ["keys"]  # the fixture


@pytest.fixture
def alice(keys: Keys) -> SshKey:
    return keys.ssh("alice")


@pytest.fixture
def history(tmp_path: Path, alice: SshKey) -> Path:
    """A git repository (the fleet in ``fleet/``) whose HEAD, the base, alice signed."""
    root = tmp_path / "repo"
    write_tree(root, dict(BASE_FILES))
    git(root, "init", "-q", "-b", "main")
    signed_commit(root, "base", alice)
    (tmp_path / "allowed_signers").write_text(alice.signers_line)
    return root


def _run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


def _trusted(history: Path) -> list[str]:
    return ["--trusted-ssh-signers", str(history.parent / "allowed_signers")]


def _bump(history: Path, key: SshKey | None) -> str:
    write_tree(
        history,
        {"channels/regular.yaml": channel_yaml("regular", {"widget": "2.0.0", "gadget": "1.0.0"})},
    )
    return signed_commit(history, "bump", key)


def test_validate_verify_accepts_a_commit_signed_by_a_trusted_key(history: Path) -> None:
    result = _run("validate", history / "fleet", "--verify", *_trusted(history))

    assert result.exit_code == 0, result.output
    assert "signed by trusted keys" in result.stderr


def test_validate_verify_refuses_unsigned_and_unknown_keys(history: Path, keys: Keys) -> None:
    unsigned = _bump(history, None)
    result = _run("validate", history / "fleet", "--verify", *_trusted(history))
    assert result.exit_code == 1
    assert f"signatures: commit {unsigned[:12]}: it is not signed" in result.stderr
    assert "valid: 3 runtimes" in result.output  # the content itself is valid

    stranger = signed_commit(history, "by a stranger", keys.ssh("mallory"))
    result = _run("validate", history / "fleet", "--verify", "-o", "json", *_trusted(history))
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    check_document(document, "Validation")
    assert document["valid"] is True
    assert document["signatures"]["signed"] is False
    assert [(b["commit"], b["status"]) for b in document["signatures"]["bad"]] == [
        (stranger, "UntrustedKey")
    ]


def test_validate_verify_refuses_changes_no_signature_covers(history: Path) -> None:
    write_tree(history, {"fleet/runtimes/d.yaml": "# not committed\n"})

    result = _run("validate", history / "fleet", "--verify", *_trusted(history))

    assert result.exit_code == 1
    assert "the working tree has changes that no signature covers" in result.stderr


def test_verify_needs_trusted_keys(history: Path) -> None:
    result = _run("validate", history / "fleet", "--verify")
    assert result.exit_code == 2
    assert "--verify needs trusted keys" in result.stderr
    result = _run("diff", history / "fleet", "--verify", *_trusted(history))
    assert result.exit_code == 2
    assert "--verify needs --base" in result.stderr


def test_diff_base_verify_checks_the_head_or_every_commit_since_base(
    history: Path, alice: SshKey
) -> None:
    base = git(history, "rev-parse", "HEAD").strip()
    unsigned = _bump(history, None)
    signed_commit(history, "on top, signed", alice)
    args: list[str | Path] = [
        "diff",
        history / "fleet",
        "--base",
        base,
        "--verify",
        *_trusted(history),
    ]

    result = _run(*args)  # the head alone: signed
    assert result.exit_code == 1, result.output  # changes
    assert "widget 1.0.0 -> 2.0.0" in result.output

    result = _run(*args, "--verify-every-commit")
    assert result.exit_code == 2
    assert f"signatures: commit {unsigned[:12]}: it is not signed" in result.stderr
    assert f"every commit since {base[:12]} must carry a good signature" in result.stderr
    assert result.stdout == ""  # no plan for a history that would be refused


def test_diff_base_verify_of_a_head_revision(history: Path, keys: Keys) -> None:
    base = git(history, "rev-parse", "HEAD").strip()
    bad = _bump(history, keys.ssh("mallory"))
    git(history, "checkout", "-q", base)  # the working tree is not what is compared

    result = _run(
        "diff", history / "fleet", "--base", base, "--head", bad, "--verify", *_trusted(history)
    )

    assert result.exit_code == 2
    assert f"commit {bad[:12]}: it is signed by a key that is not trusted" in result.stderr
