"""The trusted-key options of ``daemon``, ``validate --verify`` and ``diff --base --verify``,
and the check the two commands run on the commits they read.

:func:`trusted_keys_options` adds ``--trusted-ssh-signers``, ``--trusted-openpgp-keys``,
``--trusted-keys-dir`` and ``--verify-every-commit`` to a command and hands the command one
``trusted_keys`` value (:class:`reconciler.source.trust.TrustedKeys`, imported only when a
command runs: ``reconciler --help`` stays quick; the verification itself only with
``--verify``). The keys come from these flags (or the environment), never from the repository
being verified.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

if TYPE_CHECKING:
    from reconciler.core.signatures import SignatureVerdict
    from reconciler.source.trust import TrustedKeys

F = TypeVar("F", bound=Callable[..., Any])

_SPLIT = "in the environment, separated by ':'"

_OPTIONS = (
    click.option(
        "--trusted-ssh-signers",
        "trusted_ssh_signers",
        multiple=True,
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        envvar="RECONCILER_TRUSTED_SSH_SIGNERS",
        metavar="FILE",
        help="An allowed-signers file (ssh-keygen's format, as git's gpg.ssh.allowedSignersFile: "
        "'PRINCIPAL KEYTYPE KEY' per line) whose SSH keys may sign commits (repeatable; "
        f"{_SPLIT}).",
    ),
    click.option(
        "--trusted-openpgp-keys",
        "trusted_openpgp_keys",
        multiple=True,
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        envvar="RECONCILER_TRUSTED_OPENPGP_KEYS",
        metavar="FILE",
        help="OpenPGP public keys (armored or binary, one or more in a file, as 'gpg --export' "
        f"writes them) that may sign commits (repeatable; {_SPLIT}).",
    ),
    click.option(
        "--trusted-keys-dir",
        "trusted_keys_dirs",
        multiple=True,
        type=click.Path(file_okay=False, exists=True, path_type=Path),
        envvar="RECONCILER_TRUSTED_KEYS_DIR",
        metavar="DIR",
        help="A folder of trusted keys, such as a mounted Secret: allowed_signers and "
        "*.allowed_signers files (SSH), *.asc, *.gpg and *.pgp files (OpenPGP); read again at "
        f"each verification, so keys rotate without a restart (repeatable; {_SPLIT}).",
    ),
    click.option(
        "--verify-every-commit",
        is_flag=True,
        envvar="RECONCILER_VERIFY_EVERY_COMMIT",
        help="Every commit since the last accepted one (daemon) or since --base (diff) must be "
        "signed by a trusted key, not only the newest.",
    ),
)


def trusted_keys_options(*, every_commit: bool = True) -> Callable[[F], F]:
    """Add the trusted-key options to a command (``--verify-every-commit`` only when
    ``every_commit``), which takes one ``trusted_keys`` value instead."""

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def with_keys(*args: Any, **kwargs: Any) -> Any:
            kwargs["trusted_keys"] = trusted_keys_of(
                kwargs.pop("trusted_ssh_signers"),
                kwargs.pop("trusted_openpgp_keys"),
                kwargs.pop("trusted_keys_dirs"),
                every_commit=kwargs.pop("verify_every_commit", False),
            )
            return command(*args, **kwargs)

        wrapped: Any = with_keys
        for option in reversed(_OPTIONS if every_commit else _OPTIONS[:-1]):
            wrapped = option(wrapped)
        return cast(F, wrapped)

    return decorate


def trusted_keys_of(
    ssh: Sequence[Path], openpgp: Sequence[Path], folders: Sequence[Path], *, every_commit: bool
) -> TrustedKeys:
    """The options' value."""
    from reconciler.source.trust import TrustedKeys

    return TrustedKeys(tuple(ssh), tuple(openpgp), tuple(folders), every_commit)


trusted_keys_secret_option = click.option(
    "--trusted-keys-secret",
    metavar="NAME",
    default="",
    envvar="RECONCILER_TRUSTED_KEYS_SECRET",
    help="A Secret in --secret-namespace whose keys are trusted key files, named as in "
    "--trusted-keys-dir; read through the API at each verification (RBAC: get on this Secret).",
)


def with_secret(trusted_keys: TrustedKeys, namespace: str, name: str) -> TrustedKeys:
    """``trusted_keys`` that also trust the keys of the Secret ``namespace/name`` (none: as
    they are), read by the cluster adapter at each verification."""
    if not name:
        return trusted_keys

    def fetch() -> dict[str, bytes]:
        from reconciler.cluster.kube import fetch_secret_data  # the client, only when used

        return fetch_secret_data(namespace, name)

    return dataclasses.replace(trusted_keys, secret=f"{namespace}/{name}", fetch_secret=fetch)


def verify_option(command: F) -> F:
    """``--verify``: the commit read must be signed by a trusted key."""
    return click.option(
        "--verify",
        is_flag=True,
        help="Check that the commit is signed by a trusted key (--trusted-ssh-signers, "
        "--trusted-openpgp-keys, --trusted-keys-dir), as the daemon does; fail if not.",
    )(command)


def need_keys(trusted_keys: TrustedKeys) -> None:
    """``--verify`` without any trusted key is a usage error."""
    if not trusted_keys.configured:
        raise click.UsageError(
            "--verify needs trusted keys: --trusted-ssh-signers, --trusted-openpgp-keys or "
            "--trusted-keys-dir"
        )


def verify_checkout(
    repo: Path, trusted_keys: TrustedKeys, head: str | None = None, since: str | None = None
) -> SignatureVerdict:
    """The signature verdict on ``head`` of the git repository holding ``repo`` (None: the
    commit checked out, whose folder ``repo`` must then have no uncommitted change, which no
    signature covers); with ``since`` and ``--verify-every-commit``, on every commit since
    ``since``."""
    from reconciler.source.signatures import (
        find_git_dir,
        resolve_commit,
        uncommitted,
        verify_commits,
    )

    git_dir = find_git_dir(repo)
    commit = resolve_commit(git_dir, head or "HEAD")
    base = resolve_commit(git_dir, since) if since is not None else None
    verdict = verify_commits(git_dir, commit, trusted_keys, base)
    if head is None and uncommitted(repo):
        return dataclasses.replace(verdict, uncommitted=True)
    return verdict


def print_verdict(verdict: SignatureVerdict) -> None:
    """One line per commit to blame on stderr, or the line saying the commits are signed."""
    if verdict.accepted:
        count = verdict.checked
        what = "commit" if count == 1 else f"{count} commits"
        click.echo(f"signatures: {what} up to {verdict.head[:12]} signed by trusted keys", err=True)
        return
    click.echo(f"signatures: {verdict.reason}", err=True)
    for signature in verdict.bad[:-1]:  # the oldest one is in the reason already
        click.echo(f"signatures: {signature.reason}", err=True)
    if verdict.bad and verdict.uncommitted:
        click.echo("signatures: the working tree has changes that no signature covers", err=True)


def verdict_json(verdict: SignatureVerdict) -> dict[str, Any]:
    """``signatures`` of ``validate -o json`` (with ``--verify``)."""
    return {
        "head": verdict.head,
        "checked": verdict.checked,
        "signed": verdict.accepted,
        "uncommitted": verdict.uncommitted,
        "reason": verdict.reason,
        "bad": verdict.to_json(),
    }
