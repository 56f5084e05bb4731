"""The ``reconciler`` command line (click): the composition root of the program.

This package holds one module per command group (``validate``, ``render``, ``diff``, ``sync``,
``status``, ``operations``, ``daemon``), the options they share (:mod:`.options`) and their
exit statuses (:mod:`.exits`). Here: the click group, the one place where our errors become a
message and an exit status (:class:`_Group`), and :func:`main`, the console script.

Exit codes are carried by exception types (:mod:`.exits`). Any other exception is a bug: one
line ``error: internal error: TYPE: message`` and exit 2 (1 would read as "invalid" or "changes
pending" to a script); ``--debug`` or ``RECONCILER_DEBUG=1`` prints its traceback. An
unexpected exception inside a step fails only its operation (see
:mod:`reconciler.operations.crash`).

Importing this package is cheap: it imports no command module (:data:`COMMANDS`: the group
imports one when the command is run or listed), and a command module imports at module level
only click, the standard library and ``reconciler.errors``; the loader, the git source, the
planner, the operations engine, the cluster client and the daemon are imported inside the
command that needs them (``tests/cli/test_cli_imports.py`` checks it), so ``reconciler
validate`` never pays for the Kubernetes client or the daemon's HTTP server.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import Any

import click

from reconciler import __version__
from reconciler.cli.exits import BROKEN_PIPE, exit_status_of, report_internal
from reconciler.cli.options import DEBUG_ENV, debugging
from reconciler.errors import ReconcilerError


class _Group(click.Group):
    """Maps our errors to messages and exit codes, for every command, in one place; anything
    else is a bug: one line and exit 2 (the traceback with --debug). A usage error (a bad flag
    value, an unknown command) is one line too, naming the command's ``--help``."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            result = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as error:
            click.echo(one_line_usage_error(error), err=True)
            sys.exit(error.exit_code)
        except click.ClickException as error:
            error.show()
            sys.exit(error.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, name = COMMANDS[cmd_name]
            self.add_command(getattr(import_module(f"reconciler.cli.{module}"), name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ReconcilerError as error:
            ctx.exit(exit_status_of(error))
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except BrokenPipeError:  # `reconciler status | head`: stop quietly, as cat does
            _silence_stdout()
            ctx.exit(BROKEN_PIPE)
        except Exception as error:  # the crash barrier of every command
            ctx.exit(report_internal(error, debug=debugging(ctx)))


#: The limits of the renderer sandbox (docs/security.md), in the order of ``RenderLimits``:
#: flag, type, default (the sandbox's), help. Each is also ``RECONCILER_<FLAG>``.
RENDER_LIMITS: tuple[tuple[str, click.ParamType[Any], float, str], ...] = (
    (
        "--render-timeout",
        click.FloatRange(min=0.1),
        30.0,
        "Seconds (wall clock, and CPU) one render of a chart or overlay may take.",
    ),
    (
        "--render-memory",
        click.IntRange(min=64 << 20),
        1 << 30,
        "Bytes of memory one render may write (its worker's RLIMIT_DATA).",
    ),
    (
        "--chart-size-limit",
        click.IntRange(min=1),
        100 << 20,
        "Refuse a pulled chart archive, or its unpacked files together, over this many bytes.",
    ),
    (
        "--chart-file-limit",
        click.IntRange(min=1),
        5 << 20,
        "Refuse a pulled chart archive with a file over this many bytes (unpacked).",
    ),
)


def _render_limit_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` with the options of :data:`RENDER_LIMITS`."""
    for flag, kind, default, text in reversed(RENDER_LIMITS):
        envvar = "RECONCILER_" + flag.removeprefix("--").replace("-", "_").upper()
        option = click.option(
            flag, type=kind, default=default, show_default=True, envvar=envvar, help=text
        )
        command = option(command)
    return command


@click.group(
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, "--version", prog_name="reconciler")
@click.option(
    "--debug",
    is_flag=True,
    envvar=DEBUG_ENV,
    help=f"Show the traceback of an internal error (a bug), also {DEBUG_ENV}=1.",
)
@_render_limit_options
def cli(debug: bool, **limits: float) -> None:
    """Declarative GitOps for Kubernetes modules across a fleet of clusters.

    A config repo declares runtimes (clusters), modules (one folder per version) and release
    channels. validate checks such a repo, render shows what each runtime should run, diff
    shows what would change in the clusters and sync makes it so.
    """
    given = tuple(limits.values())
    if given != tuple(default for _, _, default, _ in RENDER_LIMITS):  # else the sandbox's own
        from reconciler.render.sandbox import RenderLimits, configure

        configure(RenderLimits(*given))  # type: ignore[arg-type]


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (tests): nothing to flush
        pass


def one_line_usage_error(error: click.UsageError) -> str:
    """``error: MESSAGE (see 'reconciler COMMAND --help')``: what to fix, on one line."""
    command = error.ctx.command_path if error.ctx is not None else "reconciler"
    message = " ".join(error.format_message().split())
    return f"error: {message} (see '{command} --help')"


#: Allocations between two collections of the youngest generation (Python's default: 700).
#: Reading a repo allocates its documents as trees, rarely cycles: the default collects about
#: every 700 new containers and rescans all the older ones every 100 of those (8% of ``diff
#: --base`` on a 1,000-runtime fleet). Cycles are still collected, in bigger batches.
GC_THRESHOLD = 20_000


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point. Run as the program (``argv`` from ``sys.argv``), it tunes
    the garbage collector of its process (:data:`GC_THRESHOLD`, frozen at exit); called with
    ``argv`` (tests), it leaves the caller's process alone."""
    if argv is not None:
        cli.main(args=list(argv), prog_name="reconciler")
        return
    import gc

    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    try:
        cli.main(args=None, prog_name="reconciler")
    finally:  # exiting: the interpreter's last collection need not walk everything read
        gc.freeze()


#: Each command's module (in this package) and object. A command's module is imported when the
#: command is looked up (run, its help, completion) or the commands are listed (``--help``), so a
#: command never pays for the imports of the others (``tests/cli/test_cli_imports.py``).
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("validate", "validate"),
    "render": ("render", "render"),
    "diff": ("diff", "diff"),
    "sync": ("sync", "sync"),
    "reconcile": ("reconcile", "reconcile"),
    "operations": ("operations", "operations"),
    "status": ("status", "status"),
    "get": ("get", "get"),
    "tree": ("tree", "tree"),
    "check": ("check", "check"),
    "rbac": ("rbac", "rbac"),
    "members": ("members", "members"),
    "daemon": ("daemon", "daemon"),
    "suspend": ("suspend", "suspend"),
    "resume": ("suspend", "resume"),
    "rollout": ("rollout", "rollout"),
    "completion": ("completion", "completion"),
    "version": ("version", "version"),
}
