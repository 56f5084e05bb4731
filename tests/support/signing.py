"""Real signing keys for tests of signed-commit verification: SSH keys made by ``ssh-keygen``
and OpenPGP keys made by ``gpg`` in temporary homes, commits signed with them by real git, and
a commit whose signature no longer matches its content (a forged one). Tests that need the
tools skip with a reason when they are missing, and fail when CI is set."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def need_signing_tools() -> None:
    """Skip (fail under CI) when ``gpg`` or ``ssh-keygen`` is missing."""
    missing = [tool for tool in ("gpg", "ssh-keygen", "gpgconf") if shutil.which(tool) is None]
    if missing:
        message = f"{', '.join(missing)} not installed (Debian: gnupg, openssh-client)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@dataclass(frozen=True)
class SshKey:
    """An SSH signing key: the private key file and its allowed-signers line."""

    private: Path
    principal: str

    @property
    def public(self) -> str:
        return self.private.with_suffix(".pub").read_text().strip()

    @property
    def signers_line(self) -> str:
        return f"{self.principal} {self.public}\n"

    def sign_options(self) -> list[str]:
        return ["-c", "gpg.format=ssh", "-c", f"user.signingkey={self.private}"]


@dataclass(frozen=True)
class PgpKey:
    """An OpenPGP key in its own GNUPGHOME: the fingerprint and the armored public key."""

    home: Path
    fingerprint: str

    def armored(self) -> bytes:
        return subprocess.run(
            ["gpg", "--batch", "--armor", "--export", self.fingerprint],
            env=gpg_env(self.home),
            capture_output=True,
            check=True,
        ).stdout

    def sign_options(self) -> list[str]:
        return ["-c", "gpg.format=openpgp", "-c", f"user.signingkey={self.fingerprint}"]

    def stop_agent(self) -> None:
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=gpg_env(self.home), check=False)


def gpg_env(home: Path) -> dict[str, str]:
    return {**os.environ, "GNUPGHOME": str(home)}


def make_ssh_key(folder: Path, name: str) -> SshKey:
    folder.mkdir(parents=True, exist_ok=True)
    private = folder / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(private)],
        check=True,
    )
    return SshKey(private, f"{name}@example.com")


def make_pgp_key(name: str) -> PgpKey:
    """A fresh ed25519 OpenPGP key in a GNUPGHOME of its own, under /tmp (gpg-agent's socket
    lives there and its path must stay short); :class:`Keys` removes it."""
    home = Path(tempfile.mkdtemp(prefix="rk-", dir="/tmp"))
    subprocess.run(
        [
            "gpg",
            "--batch",
            "--quiet",
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
            "--quick-gen-key",
            f"{name} <{name}@example.com>",
            "ed25519",
            "sign",
            "never",
        ],
        env=gpg_env(home),
        capture_output=True,
        check=True,
    )
    listing = subprocess.run(
        ["gpg", "--batch", "--with-colons", "--list-keys"],
        env=gpg_env(home),
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    fingerprint = next(line.split(":")[9] for line in listing.splitlines() if line[:4] == "fpr:")
    return PgpKey(home, fingerprint)


class Keys:
    """The keys one test makes: SSH keys under its folder, OpenPGP keys in homes of their own
    (removed, their agents stopped, by :meth:`close`)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.made: list[PgpKey] = []

    def ssh(self, name: str) -> SshKey:
        return make_ssh_key(self.folder, name)

    def pgp(self, name: str) -> PgpKey:
        key = make_pgp_key(name)
        self.made.append(key)
        return key

    def close(self) -> None:
        for key in self.made:
            key.stop_agent()
            shutil.rmtree(key.home, ignore_errors=True)


@pytest.fixture
def keys(tmp_path: Path) -> Iterator[Keys]:
    """Real keys for the test (gpg and ssh-keygen needed)."""
    need_signing_tools()
    made = Keys(tmp_path / "keys")
    try:
        yield made
    finally:
        made.close()


def git(work: Path, *args: str, env: dict[str, str] | None = None) -> str:
    identity = ["-c", "user.email=t@example.io", "-c", "user.name=t"]
    return subprocess.run(
        ["git", *identity, *args], cwd=work, env=env, capture_output=True, text=True, check=True
    ).stdout


def signed_commit(work: Path, message: str, key: SshKey | PgpKey | None) -> str:
    """Commit what is staged in ``work`` (or nothing), signed with ``key`` (unsigned: None)."""
    git(work, "add", "-A")
    if key is None:
        git(work, "commit", "-qm", message, "--allow-empty", "--no-gpg-sign")
    else:
        env = gpg_env(key.home) if isinstance(key, PgpKey) else None
        git(work, *key.sign_options(), "commit", "-qS", "-m", message, "--allow-empty", env=env)
    return git(work, "rev-parse", "HEAD").strip()


def forged_commit(work: Path, message: str) -> str:
    """A copy of HEAD (a signed commit) with another message and the same signature: the
    signature no longer matches; HEAD moves to it."""
    body = git(work, "cat-file", "commit", "HEAD")
    head, _, old_message = body.partition("\n\n")
    forged = f"{head}\n\n{message}\n"
    assert old_message != forged
    commit = subprocess.run(
        ["git", "hash-object", "-t", "commit", "-w", "--stdin"],
        cwd=work,
        input=forged,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    git(work, "update-ref", "HEAD", commit)
    return commit
