"""``reconciler version``: the reconciler's and Python's versions, as ``kubectl version`` and
``flux version`` print theirs (``reconciler --version`` prints the first only)."""

from __future__ import annotations

import platform

import click

from reconciler import __version__
from reconciler.cli import exits
from reconciler.cli.output import echo_document, is_document, output_option


@click.command(epilog=exits.VERSION.describe())
@output_option("text", "json", "yaml", help="text: one line per version; json/yaml: a document.")
def version(output_format: str) -> None:
    """The reconciler's version and the Python version it runs on."""
    python = platform.python_version()
    if is_document(output_format):
        body = {"reconcilerVersion": __version__, "pythonVersion": python}
        echo_document("Version", body, output_format)
        return
    click.echo(f"reconciler {__version__}")
    click.echo(f"python {python}")
