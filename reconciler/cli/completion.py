"""``reconciler completion bash|zsh|fish``: the shell completion script, printed.

Completes commands, options, choices and, for ``--runtime``, the runtime names of the config
repo given on the command line (or of the current directory). The script calls ``reconciler``
with ``_RECONCILER_COMPLETE`` set, as click's completion does.
"""

from __future__ import annotations

import click

from reconciler.cli import exits

_SHELLS = ("bash", "zsh", "fish")


@click.command(epilog=exits.COMPLETION.describe())
@click.argument("shell", type=click.Choice(_SHELLS))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the completion script of SHELL (bash, zsh or fish).

    \b
    bash: reconciler completion bash > ~/.local/share/bash-completion/completions/reconciler
    zsh:  reconciler completion zsh > "${fpath[1]}/_reconciler"
    fish: reconciler completion fish > ~/.config/fish/completions/reconciler.fish
    """
    from click.shell_completion import get_completion_class

    root = ctx.find_root()
    completer = get_completion_class(shell)
    if completer is None:  # click knows the three shells the choice allows
        raise click.UsageError(f"no completion for {shell}")
    script = completer(root.command, {}, "reconciler", "_RECONCILER_COMPLETE").source()
    click.echo(script)
