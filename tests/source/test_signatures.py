"""Signed-commit verification with real git, real ssh-keygen and gpg keys made here, trusted
only through the keys given (never through the repository's own configuration)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.core.signatures import SignatureStatus
from reconciler.errors import SourceError, TransientError
from reconciler.source.signatures import (
    TrustedKeys,
    check_trusted_keys,
    resolve_commit,
    verify_commits,
)
from tests.support.signing import Keys, SshKey, forged_commit, git, keys, signed_commit

__all__ = ["keys"]  # the fixture


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    return folder


def _signers(path: Path, *lines: str) -> Path:
    path.write_text("".join(lines))
    return path


def _git_dir(work: Path) -> Path:
    return work / ".git"


def test_a_commit_signed_by_a_trusted_ssh_key_is_accepted(keys: Keys, work: Path) -> None:
    alice = keys.ssh("alice")
    commit = signed_commit(work, "one", alice)
    trusted = TrustedKeys(ssh_signers=(_signers(work.parent / "signers", alice.signers_line),))

    verdict = verify_commits(_git_dir(work), commit, trusted)

    assert verdict.accepted, verdict.reason
    assert verdict.checked == 1


@pytest.mark.parametrize(
    ("signer", "status"),
    [
        (None, SignatureStatus.UNSIGNED),
        ("mallory", SignatureStatus.UNTRUSTED_KEY),
    ],
)
def test_unsigned_or_unknown_ssh_key_is_refused_with_the_reason(
    keys: Keys, work: Path, signer: str | None, status: SignatureStatus
) -> None:
    alice = keys.ssh("alice")
    commit = signed_commit(work, "one", keys.ssh(signer) if signer else None)
    trusted = TrustedKeys(ssh_signers=(_signers(work.parent / "signers", alice.signers_line),))

    verdict = verify_commits(_git_dir(work), commit, trusted)

    assert not verdict.accepted
    assert [b.status for b in verdict.bad] == [status]
    assert commit[:12] in verdict.reason
    assert status.reason in verdict.reason


def test_openpgp_keys_trusted_only_when_given(keys: Keys, work: Path, tmp_path: Path) -> None:
    carol, dave = keys.pgp("carol"), keys.pgp("dave")
    (tmp_path / "carol.asc").write_bytes(carol.armored())
    trusted = TrustedKeys(openpgp_keys=(tmp_path / "carol.asc",))

    good = signed_commit(work, "by carol", carol)
    assert verify_commits(_git_dir(work), good, trusted).accepted
    unknown = signed_commit(work, "by dave", dave)
    verdict = verify_commits(_git_dir(work), unknown, trusted)
    assert [b.status for b in verdict.bad] == [SignatureStatus.UNTRUSTED_KEY]
    assert verdict.bad[0].key  # the key id, so that a person can tell whose it was


def test_a_signature_that_does_not_match_its_commit_is_bad(
    keys: Keys, work: Path, tmp_path: Path
) -> None:
    carol = keys.pgp("carol")
    (tmp_path / "carol.asc").write_bytes(carol.armored())
    signed_commit(work, "by carol", carol)
    forged = forged_commit(work, "something carol never signed")

    verdict = verify_commits(
        _git_dir(work), forged, TrustedKeys(openpgp_keys=(tmp_path / "carol.asc",))
    )

    assert [b.status for b in verdict.bad] == [SignatureStatus.BAD_SIGNATURE]


def test_every_commit_since_the_last_accepted_one(keys: Keys, work: Path) -> None:
    alice = keys.ssh("alice")
    trusted = TrustedKeys(
        ssh_signers=(_signers(work.parent / "signers", alice.signers_line),), every_commit=True
    )
    accepted = signed_commit(work, "accepted before", alice)
    unsigned = signed_commit(work, "slipped in unsigned", None)
    head = signed_commit(work, "good on top", alice)

    verdict = verify_commits(_git_dir(work), head, trusted, since=accepted)
    assert not verdict.accepted
    assert [b.commit for b in verdict.bad] == [unsigned]
    assert verdict.checked == 2  # the commit accepted before is not checked again
    assert f"every commit since {accepted[:12]} must carry" in verdict.reason

    head_only = TrustedKeys(ssh_signers=trusted.ssh_signers)
    assert verify_commits(_git_dir(work), head, head_only, since=accepted).accepted


def test_key_rotation_two_trusted_keys(keys: Keys, work: Path, tmp_path: Path) -> None:
    old, new, carol = keys.ssh("old"), keys.ssh("new"), keys.pgp("carol")
    folder = tmp_path / "trusted"  # a mounted Secret: ..data entries, keys by name
    folder.mkdir()
    (folder / "..data").mkdir()
    _signers(folder / "allowed_signers", old.signers_line, new.signers_line)
    (folder / "carol.asc").write_bytes(carol.armored())
    trusted = TrustedKeys(folders=(folder,), every_commit=True)
    assert check_trusted_keys(trusted) == "2 SSH signers, 1 OpenPGP key"

    first = signed_commit(work, "old key", old)
    second = signed_commit(work, "new key", new)
    third = signed_commit(work, "carol", carol)
    assert verify_commits(_git_dir(work), third, trusted, since=first).checked == 2
    assert verify_commits(_git_dir(work), third, trusted, since=first).accepted

    # the old key retired: read again at the next verification, no restart
    _signers(folder / "allowed_signers", new.signers_line)
    assert verify_commits(_git_dir(work), second, trusted).accepted
    assert not verify_commits(_git_dir(work), first, trusted).accepted


def test_the_repository_own_configuration_grants_no_trust(keys: Keys, work: Path) -> None:
    alice, mallory = keys.ssh("alice"), keys.ssh("mallory")
    commit = signed_commit(work, "by mallory", mallory)
    # the verified repository says to trust mallory, and to verify with a program that says yes
    own = _signers(work / "mallory_signers", mallory.signers_line)
    git(work, "config", "gpg.ssh.allowedSignersFile", str(own))
    git(work, "config", "gpg.ssh.program", "true")
    git(work, "config", "gpg.program", "true")
    trusted = TrustedKeys(ssh_signers=(_signers(work.parent / "signers", alice.signers_line),))

    verdict = verify_commits(_git_dir(work), commit, trusted)

    assert [b.status for b in verdict.bad] == [SignatureStatus.UNTRUSTED_KEY]


def test_key_files_that_hold_no_key_are_named(tmp_path: Path) -> None:
    empty = tmp_path / "allowed_signers"
    empty.write_text("# nobody yet\n")
    with pytest.raises(SourceError, match=r"allowed_signers: no entry in it"):
        check_trusted_keys(TrustedKeys(ssh_signers=(empty,)))
    junk = tmp_path / "junk.asc"
    junk.write_text("not a key\n")
    with pytest.raises(SourceError, match=r"junk.asc: no OpenPGP public key in it"):
        check_trusted_keys(TrustedKeys(openpgp_keys=(junk,)))
    odd = tmp_path / "folder"
    odd.mkdir()
    (odd / "id_ed25519.pub").write_text("ssh-ed25519 AAAA\n")
    with pytest.raises(SourceError, match=r"id_ed25519.pub is neither"):
        check_trusted_keys(TrustedKeys(folders=(odd,)))
    with pytest.raises(TransientError, match=r"missing: No such file"):
        verify_commits(tmp_path, "a" * 40, TrustedKeys(ssh_signers=(tmp_path / "missing",)))


def test_revisions_resolve_to_commit_ids(keys: Keys, work: Path) -> None:
    commit = signed_commit(work, "one", None)
    assert resolve_commit(_git_dir(work), "main") == commit
    with pytest.raises(SourceError, match="unknown revision 'nope'"):
        resolve_commit(_git_dir(work), "nope")


def test_a_branch_moved_back_is_checked_by_its_head(keys: Keys, work: Path) -> None:
    alice = keys.ssh("alice")
    trusted = TrustedKeys(
        ssh_signers=(_signers(work.parent / "signers", alice.signers_line),), every_commit=True
    )
    unsigned = signed_commit(work, "old, unsigned", None)
    older = signed_commit(work, "older", alice)
    newer = signed_commit(work, "newer", alice)

    verdict = verify_commits(_git_dir(work), older, trusted, since=newer)  # a revert by force
    assert verdict.accepted, verdict.reason
    assert (verdict.checked, verdict.every_commit) == (1, False)
    assert not verify_commits(_git_dir(work), unsigned, trusted, since=newer).accepted


def _backdated(work: Path, message: str, key: SshKey, date: str) -> str:
    """A commit signed now with ``key`` whose author and committer dates say ``date``."""
    git(work, "add", "-A")
    env = {**os.environ, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date}
    git(work, *key.sign_options(), "commit", "-qS", "-m", message, "--allow-empty", env=env)
    return git(work, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize("every_commit", [False, True])
def test_an_expired_ssh_key_stays_expired_whatever_date_the_commit_claims(
    keys: Keys, work: Path, every_commit: bool
) -> None:
    """git checks ``valid-before`` against the commit's own committer date: a commit backdated
    to within the key's validity would pass. The window is judged at verification time."""
    alice, bob = keys.ssh("alice"), keys.ssh("bob")
    signers = _signers(
        work.parent / "signers",
        f'{alice.principal} valid-before="20200101" {alice.public}\n',
        bob.signers_line,
    )
    trusted = TrustedKeys(ssh_signers=(signers,), every_commit=every_commit)
    accepted = signed_commit(work, "by bob", bob)
    head = _backdated(work, "by the expired key", alice, "2019-06-01T12:00:00Z")

    verdict = verify_commits(_git_dir(work), head, trusted, since=accepted)

    assert not verdict.accepted
    assert [b.status for b in verdict.bad] == [SignatureStatus.EXPIRED_KEY]
    assert "expired" in verdict.reason
    assert "2020-01-01" in verdict.reason
    alone = TrustedKeys(
        ssh_signers=(
            _signers(work.parent / "alone", signers.read_text()[: -len(bob.signers_line)]),
        )
    )
    assert check_trusted_keys(alone) == "1 SSH signer (1 expired or not yet valid), 0 OpenPGP keys"
    verdict = verify_commits(_git_dir(work), head, alone)
    assert [b.status for b in verdict.bad] == [SignatureStatus.EXPIRED_KEY]


def test_a_key_valid_now_is_judged_now_not_at_the_commit_date(keys: Keys, work: Path) -> None:
    """A key whose window holds now (``valid-after`` past, ``valid-before`` to come) signs a
    commit whatever date the commit claims; a key whose window has not begun signs none."""
    alice, carol = keys.ssh("alice"), keys.ssh("carol")
    signers = _signers(
        work.parent / "signers",
        f'{alice.principal} valid-after="20240101",valid-before="20991231" {alice.public}\n',
        f'{carol.principal} valid-after="20990101" {carol.public}\n',
    )
    trusted = TrustedKeys(ssh_signers=(signers,))
    old_date = _backdated(work, "dated before the window", alice, "2019-06-01T12:00:00Z")
    assert verify_commits(_git_dir(work), old_date, trusted).accepted

    early = _backdated(work, "dated in carol's future window", carol, "2099-06-01T12:00:00Z")
    verdict = verify_commits(_git_dir(work), early, trusted)
    assert [b.status for b in verdict.bad] == [SignatureStatus.UNTRUSTED_KEY]
    assert "not valid before 2099-01-01" in verdict.reason
