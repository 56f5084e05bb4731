"""Signed-commit verification with real git, against trusted keys the daemon was given.

:class:`~reconciler.source.trust.TrustedKeys` (also importable from here) names where the
trusted keys are: SSH allowed-signers files (git's ``gpg.format ssh``), OpenPGP public key files
(armored or binary), and folders holding either (a mounted Kubernetes Secret). They come from
the daemon's own flags, never from the repository being verified, and are read again at each
verification (a Secret's mount updated in place rotates keys without a restart).

:func:`verify_commits` builds a throw-away trust home for each verification (an allowed-signers
file that joins the given ones, and a ``GNUPGHOME`` holding only the trusted OpenPGP keys, each
trusted ultimately), then asks git for every commit's signature (``git log --format=%G?``) with
that trust only: git's system and global configuration are ignored, and the repository's own
configuration is overridden for every setting that decides trust (``gpg.program``,
``gpg.ssh.allowedSignersFile``, ``gpg.minTrustLevel`` ...). A key problem (a missing file, no
key in it) is a :class:`~reconciler.errors.TransientError` there: the commit waits, it is not
refused for it; :func:`check_trusted_keys` says the same at start, as a
:class:`~reconciler.errors.SourceError`.

Callers: the daemon's commit gate, ``validate --verify``, ``diff --base --verify``,
``reconciler daemon`` (at start).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from reconciler.core.signatures import (
    CommitSignature,
    SignatureStatus,
    SignatureVerdict,
    SignersNow,
    judge_signatures,
    judged_now,
    signers_now,
)
from reconciler.errors import ReconcilerError, SourceError, TransientError
from reconciler.source.trust import TrustedKeys as TrustedKeys  # named here too, as it was

#: File name endings of the OpenPGP public keys of a trusted-keys folder.
OPENPGP_SUFFIXES = (".asc", ".gpg", ".pgp")
#: How long a key problem makes a commit wait before it is verified again.
KEY_RETRY_SECONDS = 60.0
#: The longest one git or gpg call of a verification may take.
CALL_TIMEOUT = 120.0

_COMMIT_ID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
_FIELDS = "%H%x1f%G?%x1f%GS%x1f%GF%x1f%GK"


@dataclass(frozen=True, slots=True)
class KeyFiles:
    """The key files of a :class:`TrustedKeys`, folders listed."""

    ssh_signers: tuple[Path, ...]
    openpgp_keys: tuple[Path, ...]


def list_key_files(keys: TrustedKeys) -> KeyFiles:
    """The files ``keys`` names, each folder's by its names; a :class:`SourceError` naming the
    first folder that cannot be listed or holds a file of no known kind."""
    ssh, openpgp = list(keys.ssh_signers), list(keys.openpgp_keys)
    for folder in keys.folders:
        try:
            names = sorted(entry.name for entry in folder.iterdir())
        except OSError as error:
            raise SourceError(f"trusted keys folder {folder}: {error.strerror or error}") from None
        for name in names:
            if name.startswith("."):  # a Secret mount's ..data and ..timestamp entries
                continue
            kind = key_kind(name, f"trusted keys folder {folder}")
            (ssh if kind == "ssh" else openpgp).append(folder / name)
    return KeyFiles(tuple(ssh), tuple(openpgp))


def key_kind(name: str, where: str) -> str:
    """``ssh`` or ``openpgp``, by a key file's name; a :class:`SourceError` for another name."""
    if name == "allowed_signers" or name.endswith(".allowed_signers"):
        return "ssh"
    if name.endswith(OPENPGP_SUFFIXES):
        return "openpgp"
    raise SourceError(
        f"{where}: {name} is neither an allowed-signers file (allowed_signers, "
        "*.allowed_signers) nor an OpenPGP public key (*.asc, *.gpg, *.pgp)"
    )


#: Key material read for one verification: (what to call it in a message, its bytes).
Material = list[tuple[str, bytes]]


def read_key_material(keys: TrustedKeys) -> tuple[Material, Material]:
    """The SSH allowed-signers and OpenPGP key material of ``keys``, read now from its files,
    folders and Secret; a :class:`TransientError` naming what cannot be read."""
    try:
        files = list_key_files(keys)
    except SourceError as error:
        raise TransientError(str(error), retry_after=KEY_RETRY_SECONDS) from None
    ssh = [(f"trusted ssh signers {p}", _read_key_file(p)) for p in files.ssh_signers]
    pgp = [(f"trusted OpenPGP keys {p}", _read_key_file(p)) for p in files.openpgp_keys]
    if keys.fetch_secret is not None:
        where = f"trusted keys Secret {keys.secret}"
        try:
            data = keys.fetch_secret()
            for name, value in sorted(data.items()):
                kind = key_kind(name, where)
                (ssh if kind == "ssh" else pgp).append((f"{where} key {name}", value))
        except SourceError as error:  # a key of no known kind
            raise TransientError(str(error), retry_after=KEY_RETRY_SECONDS) from None
        except ReconcilerError as error:  # the cluster adapter's: not found, forbidden, down
            raise TransientError(f"trusted keys: {error}", retry_after=KEY_RETRY_SECONDS) from None
        if not data:
            raise TransientError(f"{where}: no key in it", retry_after=KEY_RETRY_SECONDS)
    return ssh, pgp


def check_trusted_keys(keys: TrustedKeys) -> str:
    """Read every trusted key once (at start): a summary (``2 SSH signers, 1 OpenPGP key``), or
    a :class:`SourceError` naming the file to fix."""
    try:
        with _trust_home(keys) as home:
            return home.summary
    except TransientError as error:
        raise SourceError(str(error)) from None


def find_git_dir(folder: Path) -> Path:
    """The git directory of the repository holding ``folder`` (a :class:`SourceError` when
    none does)."""
    done = _run(
        ["git", "-C", str(folder), "rev-parse", "--absolute-git-dir"], _git_env(Path(os.devnull))
    )
    if done.returncode != 0:
        raise SourceError(f"{folder}: not inside a git repository (--verify checks git commits)")
    return Path(done.stdout.decode().strip())


def uncommitted(folder: Path) -> bool:
    """Whether ``folder`` (in a git working tree) has changes or untracked files not committed
    (``git status``; ignored files aside)."""
    done = _run(
        ["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=all", "--", "."],
        _git_env(Path(os.devnull)),
    )
    if done.returncode != 0:
        raise SourceError(f"{folder}: git status failed: {done.stderr.decode().strip()}")
    return bool(done.stdout.strip())


def has_commit(git_dir: Path, commit: str) -> bool:
    """Whether the repository at ``git_dir`` holds the commit ``commit`` (an id)."""
    if not _COMMIT_ID.fullmatch(commit):
        return False
    done = _run(
        ["git", "--git-dir", str(git_dir), "cat-file", "-e", f"{commit}^{{commit}}"],
        _git_env(Path(os.devnull)),
    )
    return done.returncode == 0


def resolve_commit(git_dir: Path, revision: str) -> str:
    """The commit id ``revision`` names in the repository at ``git_dir`` (a
    :class:`SourceError` when it names none)."""
    done = _run(
        [
            "git",
            "--git-dir",
            str(git_dir),
            "rev-parse",
            "--verify",
            "--end-of-options",
            f"{revision}^{{commit}}",
        ],
        _git_env(Path(os.devnull)),
    )
    if done.returncode != 0:
        raise SourceError(f"unknown revision '{revision}' in {git_dir}")
    return done.stdout.decode().strip()


def verify_commits(
    git_dir: Path, head: str, keys: TrustedKeys, since: str | None = None
) -> SignatureVerdict:
    """The signature verdict on ``head`` in the repository at ``git_dir``: ``head`` alone, or,
    with ``keys.every_commit`` and a ``since`` (the last accepted commit), every commit
    reachable from ``head`` and not from ``since`` (merges and their branches included; ``head``
    alone when ``since`` already holds it: a branch moved back)."""
    for commit in (head, since):
        if commit is not None and not _COMMIT_ID.fullmatch(commit):
            raise SourceError(f"not a commit id: {commit[:40]!r}")
    start = since if keys.every_commit and since != head else None
    with _trust_home(keys) as home:
        signatures = _signatures(git_dir, home, head, start)
        if start is not None and not signatures:  # ``head`` is below ``since``
            start, signatures = None, _signatures(git_dir, home, head, None)
    return judge_signatures(head, signatures, start)


def _signatures(git_dir: Path, home: _Home, head: str, since: str | None) -> list[CommitSignature]:
    """What git says of the signature of ``head`` (with ``since``: of every commit since it),
    newest first, with the trust of ``home`` only."""
    limit, span = ([], [head, f"^{since}"]) if since else (["--max-count=1"], [head])
    done = _run(
        ["git", "--git-dir", str(git_dir), *_trust_options(home), "log", "--no-color", "-z",
         f"--format={_FIELDS}", *limit, "--end-of-options", *span],
        _git_env(home.path, home.gnupg),
    )  # fmt: skip
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        reason = said[-1] if said else f"exit status {done.returncode}"
        raise TransientError(
            f"cannot check the signatures of commit {head[:12]}: git log failed: {reason}",
            retry_after=KEY_RETRY_SECONDS,
        )
    records = done.stdout.decode().split("\0")
    return [judged_now(_signature(record), home.now) for record in records if record]


def _signature(record: str) -> CommitSignature:
    commit, letter, signer, fingerprint, key_id = (record.strip("\n").split("\x1f") + [""] * 5)[:5]
    status = SignatureStatus.of_letter(letter)
    trusted = status is SignatureStatus.SIGNED
    return CommitSignature(commit, status, signer if trusted else "", fingerprint or key_id)


@dataclass(frozen=True, slots=True)
class _Home:
    """A throw-away trust home: the joined allowed-signers file and a GNUPGHOME."""

    path: Path
    signers: Path
    gnupg: Path
    summary: str
    #: The SSH signers as judged when the home was made (expired ones left out).
    now: SignersNow


@contextmanager
def _trust_home(keys: TrustedKeys) -> Iterator[_Home]:
    """A temporary folder with the trusted keys only; removed after use (and its gpg-agent,
    should gpg have started one, stopped)."""
    ssh, pgp = read_key_material(keys)
    import shutil  # only when a commit is verified (startup time of every command)
    import tempfile

    if ssh and shutil.which("ssh-keygen") is None:
        raise TransientError("ssh-keygen is not installed: SSH signatures cannot be checked")
    path = Path(tempfile.mkdtemp(prefix="reconciler-trust-"))
    try:
        gnupg = path / "gnupg"
        gnupg.mkdir(mode=0o700)
        signers = path / "allowed_signers"
        now = _join_signers(ssh, signers)
        count_pgp = _import_openpgp(pgp, gnupg)
        out = f" ({len(now.left_out)} expired or not yet valid)" if now.left_out else ""
        count_ssh = len(now.lines) + len(now.left_out)
        summary = f"{_plural(count_ssh, 'SSH signer')}{out}, {_plural(count_pgp, 'OpenPGP key')}"
        yield _Home(path, signers, gnupg, summary, now)
    finally:
        if any(gnupg.glob("S.gpg-agent*")):
            _run(["gpgconf", "--kill", "gpg-agent"], {**_base_env(path), "GNUPGHOME": str(gnupg)})
        shutil.rmtree(path, ignore_errors=True)


def _join_signers(files: Material, target: Path) -> SignersNow:
    """Write the entries of every allowed-signers file in ``files`` that are valid now to
    ``target``, judged now: git would judge an entry's ``valid-before`` at each commit's own
    date, which a commit may set to any (:func:`~reconciler.core.signatures.signers_now`)."""
    lines: list[str] = []
    for label, data in files:
        text = data.decode("utf-8", "replace")
        entries = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
        if not entries:
            raise TransientError(
                f"{label}: no entry in it (each line: PRINCIPALS KEYTYPE KEY)",
                retry_after=KEY_RETRY_SECONDS,
            )
        lines += entries
    now = signers_now(lines, datetime.now(UTC))
    target.write_text("".join(f"{line}\n" for line in now.lines))
    return now


def _import_openpgp(files: Material, gnupg: Path) -> int:
    """Import every public key of ``files`` into ``gnupg`` and trust each ultimately (only
    these keys are there); how many keys."""
    if not files:
        return 0
    import shutil

    if shutil.which("gpg") is None:
        raise TransientError("gpg is not installed: OpenPGP signatures cannot be checked")
    env = {**_base_env(gnupg.parent), "GNUPGHOME": str(gnupg)}
    (gnupg / "gpg.conf").write_text("no-autostart\n")
    for label, data in files:
        done = _run(
            [
                "gpg",
                "--batch",
                "--no-autostart",
                "--status-fd",
                "1",
                "--import-options",
                "import-clean",
                "--import",
            ],
            env,
            data,
        )
        if b"[GNUPG:] IMPORT_OK" not in done.stdout:
            raise TransientError(
                f"{label}: no OpenPGP public key in it",
                retry_after=KEY_RETRY_SECONDS,
            )
    listing = _run(["gpg", "--batch", "--with-colons", "--list-keys"], env).stdout.decode()
    primaries = _primary_fingerprints(listing)
    trust = "".join(f"{fingerprint}:6:\n" for fingerprint in primaries).encode()
    _run(["gpg", "--batch", "--import-ownertrust"], env, trust)
    return len(primaries)


def _primary_fingerprints(listing: str) -> list[str]:
    """The fingerprint of each primary key in ``gpg --with-colons --list-keys`` output."""
    found, after_pub = [], False
    for line in listing.splitlines():
        fields = line.split(":")
        if fields[0] == "pub":
            after_pub = True
        elif fields[0] == "fpr" and after_pub and len(fields) > 9:
            found.append(fields[9])
            after_pub = False
    return found


def _read_key_file(file: Path) -> bytes:
    try:
        return file.read_bytes()
    except OSError as error:
        raise TransientError(
            f"trusted key file {file}: {error.strerror or error}", retry_after=KEY_RETRY_SECONDS
        ) from None


def _trust_options(home: _Home) -> list[str]:
    """git settings that decide trust, all set here: the repository's own say nothing."""
    settings = {
        "gpg.ssh.allowedSignersFile": str(home.signers),
        "gpg.ssh.program": "ssh-keygen",
        "gpg.program": "gpg",
        "gpg.openpgp.program": "gpg",
        "gpg.x509.program": "gpgsm",
        "gpg.minTrustLevel": "fully",
        "log.showSignature": "false",
        "core.fsmonitor": "false",
    }
    options: list[str] = []
    for name, value in settings.items():
        options += ["-c", f"{name}={value}"]
    return options


def _base_env(home: Path) -> dict[str, str]:
    """A clean environment: no configuration or keys of the user's, messages in English."""
    return {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(home), "LC_ALL": "C"}


def _git_env(home: Path, gnupg: Path | None = None) -> dict[str, str]:
    env = {**_base_env(home), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    if gnupg is not None:
        env["GNUPGHOME"] = str(gnupg)
    return env


def _run(
    command: Sequence[str], env: dict[str, str], given: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            list(command),
            input=given,
            capture_output=True,
            env=env,
            check=False,
            timeout=CALL_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise TransientError(f"{command[0]} gave no answer within {CALL_TIMEOUT:g}s") from None
    except OSError as error:
        raise TransientError(f"{command[0]} cannot run: {error.strerror or error}") from None


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"
