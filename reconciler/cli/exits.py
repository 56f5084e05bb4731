"""Exit statuses of the command line, named per command, and the one mapping of errors to them.

The values are a contract with scripts and CI jobs (``kubectl diff`` style for ``diff``):

- every command: ``OK`` (0); ``USAGE`` (2) for a wrong command line, a repo that cannot be
  read, a cluster or store that cannot be reached; ``CONFIG_INVALID`` (1) when the config repo
  is invalid (its diagnostics are printed); ``HELD`` (3) when the deletion brake holds.
- ``validate``: ``VALIDATE_INVALID`` (1).
- ``diff``: ``DIFF_CHANGES`` (1); ``HELD`` (3) changes the brake would hold (live) or that
  need a second look (``--base``).
- ``sync``: ``SYNC_FAILED`` (1) an operation failed or a module is in Error.

Each command's ``--help`` ends with its :class:`ExitStatuses` (``epilog``), so the help and the
values cannot drift apart. :func:`exit_status_of` is what :class:`reconciler.cli._Group` uses
to turn a :class:`~reconciler.errors.ReconcilerError` into one message and a status;
:func:`report_internal` does the same for any other exception (a bug): one line and ``USAGE``.
"""

from __future__ import annotations

from dataclasses import dataclass

import click

from reconciler.errors import ConfigError, HeldByBrakeError, ReconcilerError

OK = 0
USAGE = 2
CONFIG_INVALID = 1
HELD = 3

VALIDATE_INVALID = 1
DIFF_CHANGES = 1
SYNC_FAILED = 1
CHECK_FAILED = 1
#: Stopped by Ctrl-C (128 + SIGINT, as shells report it).
INTERRUPTED = 130
#: The reader of the output went away (``reconciler status | head``): 128 + SIGPIPE, silently.
BROKEN_PIPE = 141


@dataclass(frozen=True, slots=True)
class ExitStatuses:
    """What each exit status of one command means, for its ``--help``."""

    meanings: tuple[tuple[int, str], ...]
    heading: str = "Exit status"

    def describe(self) -> str:
        """``Exit status: 0 valid, 1 invalid, 2 ...``."""
        parts = ", ".join(f"{code} {meaning}" for code, meaning in self.meanings)
        return f"{self.heading}: {parts}."


_UNREADABLE = "a usage, read or access error"

VALIDATE = ExitStatuses(
    (
        (OK, "valid"),
        (VALIDATE_INVALID, "invalid (or, with --verify, not signed by a trusted key)"),
        (USAGE, "the repo could not be read or the command line is wrong"),
    )
)
RENDER = ExitStatuses(
    ((OK, "rendered"), (CONFIG_INVALID, "the repo is invalid"), (USAGE, _UNREADABLE))
)
RBAC = ExitStatuses(
    (
        (OK, "the role printed"),
        (CONFIG_INVALID, "the repo is invalid"),
        (USAGE, "an unknown runtime or a wrong command line"),
    )
)
LIVE_DIFF = ExitStatuses(
    (
        (OK, "no changes"),
        (DIFF_CHANGES, "changes (or the config repo is invalid)"),
        (USAGE, "an error"),
        (HELD, "changes the deletion brake holds"),
    ),
    heading="Exit status like kubectl diff",
)
FLEET_DIFF = ExitStatuses(
    (
        (OK, "no change"),
        (DIFF_CHANGES, "changes"),
        (USAGE, "error (e.g. an invalid head, or with --verify one not signed by a trusted key)"),
        (HELD, "changes that delete modules or runtimes or are held"),
    ),
    heading="Exit status with --base",
)
SYNC = ExitStatuses(
    (
        (OK, "every operation succeeded or is waiting to retry"),
        (SYNC_FAILED, "one failed or a module is in Error (or the config repo is invalid)"),
        (USAGE, _UNREADABLE),
        (HELD, "held by the deletion brake"),
        (INTERRUPTED, "stopped by Ctrl-C (operations under way stay resumable)"),
    )
)
RECONCILE = ExitStatuses(
    (
        (OK, "reconciled (with --daemon and no --wait: asked)"),
        (SYNC_FAILED, "the operation failed, a module is in Error, or --wait ran out"),
        (CONFIG_INVALID, "the repo is invalid"),
        (USAGE, "an unknown runtime, an unreachable daemon or store, a wrong command line"),
        (HELD, "the deletion brake holds the change"),
    )
)
CHECK = ExitStatuses(
    (
        (OK, "every runtime reachable with every permission"),
        (CHECK_FAILED, "a runtime unreachable or missing a permission"),
        (CONFIG_INVALID, "the repo is invalid"),
        (USAGE, "an unknown runtime or a wrong command line"),
    )
)
TREE = ExitStatuses(
    (
        (OK, "shown"),
        (CONFIG_INVALID, "the repo is invalid"),
        (USAGE, "an unknown runtime or module, or a cluster that cannot be read"),
    )
)
SUSPEND = ExitStatuses(((OK, "done"), (USAGE, "a bad name, or the state store cannot be used")))
COMPLETION = ExitStatuses(((OK, "printed"), (USAGE, "an unknown shell")))
VERSION = ExitStatuses(((OK, "printed"), (USAGE, "an unknown output format")))
RECORDS = ExitStatuses(
    ((OK, "shown"), (USAGE, "the state store cannot be read or the id is unknown"))
)
RETRIGGER = ExitStatuses(
    (
        (OK, "re-triggered (or nothing to)"),
        (USAGE, "the state store cannot be read"),
        (HELD, "held by the deletion brake"),
    )
)
PRUNE = ExitStatuses(
    ((OK, "pruned (or, with --dry-run, listed)"), (USAGE, "the state store cannot be used"))
)
DAEMON = ExitStatuses(((OK, "stopped by SIGTERM"), (USAGE, "a usage error or the port is in use")))


def exit_status_of(error: ReconcilerError) -> int:
    """Print ``error`` for people, on stderr; the exit status its type carries."""
    if isinstance(error, ConfigError):
        for diagnostic in error.diagnostics:
            click.echo(diagnostic.format(), err=True)
        count = len(error.diagnostics)
        where = f" at {error.side}" if error.side else ""
        click.echo(f"the config repo{where} is invalid ({count} errors); nothing done", err=True)
        return CONFIG_INVALID
    if isinstance(error, HeldByBrakeError):
        click.echo(str(error), err=True)
        return HELD
    click.echo(f"error: {error}", err=True)
    return USAGE


def report_internal(error: Exception, *, debug: bool) -> int:
    """An unexpected exception outside the steps: one line (the traceback with ``debug``)."""
    from reconciler.operations.crash import Crash

    crash = Crash.of(error)
    if debug:
        click.echo(crash.traceback(), err=True, nl=False)
        click.echo(f"error: internal error: {crash.type}: {crash.message}", err=True)
    else:
        click.echo(
            f"error: internal error: {crash.type}: {crash.message} "
            "(run with --debug for the traceback)",
            err=True,
        )
    return USAGE
