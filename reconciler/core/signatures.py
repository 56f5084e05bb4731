"""Signed-commit verification as values (pure): what git said of each commit's signature, and
whether a commit may be put in force.

git reports a commit's signature as one letter (``%G?``); :class:`SignatureStatus` names the
letters (a reason code of the user's contract: ``/status``, logs, metrics), and
:class:`CommitSignature` is one commit's answer, checked against the trusted keys only (never
keys from the repository being verified; :mod:`reconciler.source.signatures` does the git and
key I/O). :func:`judge_signatures` decides: every commit checked must carry a good signature
from a trusted key, or the head is refused as a whole (C7) with the first commit to blame.

Callers: :mod:`reconciler.source.signatures`, the daemon's commit gate, ``validate --verify``
and ``diff --base --verify``.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any


class SignatureStatus(StrEnum):
    """A commit's signature checked against the trusted keys, by its code in ``/status``."""

    SIGNED = "Signed"
    UNSIGNED = "Unsigned"
    UNTRUSTED_KEY = "UntrustedKey"
    BAD_SIGNATURE = "BadSignature"
    EXPIRED_SIGNATURE = "ExpiredSignature"
    EXPIRED_KEY = "ExpiredKey"
    REVOKED_KEY = "RevokedKey"

    @classmethod
    def of_letter(cls, letter: str) -> SignatureStatus:
        """git's ``%G?`` letter as a status; any letter git may add later is untrusted."""
        return _LETTERS.get(letter, cls.UNTRUSTED_KEY)

    @property
    def reason(self) -> str:
        """What is wrong, for a person (empty for :attr:`SIGNED`)."""
        return _REASONS[self]


_LETTERS = {
    "G": SignatureStatus.SIGNED,
    "N": SignatureStatus.UNSIGNED,
    "U": SignatureStatus.UNTRUSTED_KEY,  # ssh: a good signature by a key not allowed
    "E": SignatureStatus.UNTRUSTED_KEY,  # OpenPGP: the key is not among the trusted ones
    "B": SignatureStatus.BAD_SIGNATURE,
    "X": SignatureStatus.EXPIRED_SIGNATURE,
    "Y": SignatureStatus.EXPIRED_KEY,
    "R": SignatureStatus.REVOKED_KEY,
}

_REASONS = {
    SignatureStatus.SIGNED: "",
    SignatureStatus.UNSIGNED: "it is not signed",
    SignatureStatus.UNTRUSTED_KEY: "it is signed by a key that is not trusted",
    SignatureStatus.BAD_SIGNATURE: "its signature does not match its content (bad signature)",
    SignatureStatus.EXPIRED_SIGNATURE: "its signature has expired",
    SignatureStatus.EXPIRED_KEY: "it is signed by an expired key",
    SignatureStatus.REVOKED_KEY: "it is signed by a revoked key",
}


@dataclass(frozen=True, slots=True)
class CommitSignature:
    """One commit's signature as git checked it with the trusted keys: its status, the signer
    (an allowed-signers principal or an OpenPGP user id, when trusted) and the key (an SSH
    fingerprint or an OpenPGP key id; empty when unsigned). No secret: public key ids only."""

    commit: str
    status: SignatureStatus
    signer: str = ""
    key: str = ""
    #: Why the key is not trusted now, when the trusted keys know it (``expired on ...``).
    detail: str = ""

    @property
    def good(self) -> bool:
        """Signed by a trusted key, the signature good."""
        return self.status is SignatureStatus.SIGNED

    @property
    def reason(self) -> str:
        """``commit 1a2b3c4d5e6f: it is signed by a key that is not trusted (key SHA256:...)``."""
        detail = f", {self.detail}" if self.detail else ""
        key = f" (key {self.key}{detail})" if self.key and not self.good else ""
        return f"commit {self.commit[:12]}: {self.status.reason}{key}"

    def to_json(self) -> dict[str, Any]:
        """``/status``'s and ``validate -o json``'s form."""
        return {
            "commit": self.commit,
            "status": str(self.status),
            "signer": self.signer,
            "key": self.key,
            "reason": self.status.reason + (f" ({self.detail})" if self.detail else ""),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CommitSignature:
        """Inverse of :meth:`to_json` (an unknown status reads as an untrusted key)."""
        status = str(data.get("status") or "")
        known = {str(s): s for s in SignatureStatus}
        return cls(
            str(data.get("commit") or ""),
            known.get(status, SignatureStatus.UNTRUSTED_KEY),
            str(data.get("signer") or ""),
            str(data.get("key") or ""),
        )


@dataclass(frozen=True, slots=True)
class SignatureVerdict:
    """Whether the commits checked for one head may be put in force: ``bad`` lists those that
    may not (newest first, as git lists them), ``checked`` how many were checked."""

    head: str
    checked: int
    bad: tuple[CommitSignature, ...]
    every_commit: bool
    #: The commit the check started after (the one in force, a ``--base``), when every commit
    #: since it was checked.
    since: str = ""
    #: A working tree was read (``validate --verify``) and has changes no commit signs.
    uncommitted: bool = False

    @property
    def accepted(self) -> bool:
        """Every commit checked carries a good signature from a trusted key."""
        return not self.bad and self.checked > 0 and not self.uncommitted

    @property
    def reason(self) -> str:
        """One line: why the head is refused (empty when accepted)."""
        if self.accepted:
            return ""
        if not self.bad and self.uncommitted:
            return (
                f"the working tree has changes that no signature covers (on top of commit "
                f"{self.head[:12]}): commit them, signed, or check a clean checkout"
            )
        if not self.bad:
            return f"commit {self.head[:12]}: no commit to check"
        first = self.bad[-1]  # the oldest one to blame: the history went wrong there
        more = f" (and {len(self.bad) - 1} more)" if len(self.bad) > 1 else ""
        which = f"every commit since {self.since[:12]}" if self.every_commit else "the head"
        rule = f"{which} must carry a good signature from a trusted key"
        return f"{first.reason}{more}; {rule}"

    def to_json(self) -> list[dict[str, Any]]:
        """The commits to blame, for ``/status``."""
        return [signature.to_json() for signature in self.bad]


def judge_signatures(
    head: str, signatures: Sequence[CommitSignature], since: str | None = None
) -> SignatureVerdict:
    """The verdict on ``head`` from the ``signatures`` of the commits checked (``head`` alone,
    or with ``since`` every commit since that one, newest first)."""
    bad = tuple(signature for signature in signatures if not signature.good)
    return SignatureVerdict(head, len(signatures), bad, since is not None, since or "")


#: An allowed-signers time option's value: ``YYYYMMDD`` or ``YYYYMMDDHHMM[SS]``, ``Z`` for UTC.
_SIGNER_TIME = re.compile(r"(\d{8})(\d{4}(\d{2})?)?(Z?)")
_WINDOW_OPTIONS = ("valid-after", "valid-before")


@dataclass(frozen=True, slots=True)
class SignersNow:
    """Allowed-signers entries judged at one moment: the lines of the keys valid then, their
    time options dropped (git would judge them at each commit's own, forgeable, date), and the
    keys left out, by SSH fingerprint, with why (``expired on 2020-01-01 00:00``)."""

    lines: tuple[str, ...]
    left_out: Mapping[str, tuple[SignatureStatus, str]]


def signers_now(lines: Iterable[str], now: datetime) -> SignersNow:
    """Each entry (``PRINCIPALS [OPTIONS] KEYTYPE KEY [COMMENT]``) whose ``valid-after`` /
    ``valid-before`` window holds at ``now`` (an aware time), without those options; the others
    left out. A time without ``Z`` is local time, as ssh-keygen reads it; an entry that cannot
    be parsed is kept as it is (git reads it, or says what is wrong)."""
    kept: list[str] = []
    left_out: dict[str, tuple[SignatureStatus, str]] = {}
    for line in lines:
        fields = line.split()
        if len(fields) < 4 or _is_key_type(fields[1]) or not _is_key_type(fields[2]):
            kept.append(line)
            continue
        options = _split_options(fields[1])
        window = {name: _signer_time(value) for name, value in options if name in _WINDOW_OPTIONS}
        after, before = window.get("valid-after"), window.get("valid-before")
        if before is not None and now >= before:
            found = (SignatureStatus.EXPIRED_KEY, f"expired on {before:%Y-%m-%d %H:%M}")
            left_out[ssh_fingerprint(fields[3])] = found
        elif after is not None and now < after:
            found = (SignatureStatus.UNTRUSTED_KEY, f"not valid before {after:%Y-%m-%d %H:%M}")
            left_out[ssh_fingerprint(fields[3])] = found
        else:
            rest = ",".join(f"{n}={v}" if v else n for n, v in options if n not in _WINDOW_OPTIONS)
            kept.append(" ".join([fields[0], *([rest] if rest else []), *fields[2:]]))
    return SignersNow(tuple(kept), left_out)


def judged_now(signature: CommitSignature, now: SignersNow) -> CommitSignature:
    """``signature`` with the reason its key was left out of the trusted keys now, if it was."""
    found = now.left_out.get(signature.key)
    if signature.good or found is None:
        return signature
    return replace(signature, status=found[0], detail=found[1])


def ssh_fingerprint(key: str) -> str:
    """``SHA256:...`` of a base64 public key blob, as ssh-keygen and git print it."""
    try:
        blob = base64.b64decode(key, validate=True)
    except ValueError:
        return ""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def _is_key_type(field: str) -> bool:
    return field.startswith(("ssh-", "ecdsa-", "sk-ssh-", "sk-ecdsa-"))


def _split_options(text: str) -> list[tuple[str, str]]:
    """``a="x,y",b,c=d`` -> ``[("a", '"x,y"'), ("b", ""), ("c", "d")]`` (quotes kept)."""
    found: list[tuple[str, str]] = []
    for option in re.findall(r'(?:[^,"]|"[^"]*")+', text):
        name, _, value = option.partition("=")
        found.append((name.strip().lower(), value))
    return found


def _signer_time(value: str) -> datetime | None:
    matched = _SIGNER_TIME.fullmatch(value.strip('"'))
    if matched is None:
        return None
    digits = matched.group(1) + (matched.group(2) or "0000")
    form = "%Y%m%d%H%M%S" if len(digits) == 14 else "%Y%m%d%H%M"
    try:
        moment = datetime.strptime(digits, form)
    except ValueError:
        return None
    if matched.group(4):
        from datetime import UTC

        return moment.replace(tzinfo=UTC)
    return moment.astimezone()  # local time, as ssh-keygen reads it
