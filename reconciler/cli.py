"""The ``reconciler`` command line (click): the composition root of the program.

Parses arguments, builds the loader's options and hands them down; nothing deeper reads the
environment or prints. Exit codes are carried by exception types: 0 success, 1 the config repo is
invalid (:class:`~reconciler.errors.ConfigError`), 2 a usage or I/O error (every other
:class:`~reconciler.errors.ReconcilerError`, and click's usage errors).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import click
import yaml

from reconciler import __version__
from reconciler.diagnostics import Diagnostic, did_you_mean
from reconciler.errors import ConfigError, NotFoundError, ReconcilerError
from reconciler.loader import DEFAULT_MAX_FILE_SIZE, ReadOptions, load_repo
from reconciler.model import ConfigRepo
from reconciler.render import Renderer
from reconciler.resolve import Resolution, resolve_runtime
from reconciler.validate import Validation

EXIT_OK, EXIT_INVALID, EXIT_ERROR = 0, 1, 2

_Dumper: type[Any] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

repo_argument = click.argument(
    "repo", default=".", type=click.Path(file_okay=False, path_type=Path), metavar="[REPO]"
)
channels_option = click.option(
    "--channels",
    "channels_dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Read channels from this folder instead of the one reconciler.yaml names.",
)
max_size_option = click.option(
    "--max-file-size",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_FILE_SIZE,
    show_default=True,
    help="Refuse YAML files larger than this many bytes.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="reconciler")
def cli() -> None:
    """Declarative GitOps for Kubernetes modules across a fleet of clusters.

    A config repo declares runtimes (clusters), modules (one folder per version) and release
    channels. These commands check such a repo and show what each runtime should run.
    """


@cli.command()
@repo_argument
@channels_option
@max_size_option
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: one compiler-style line per error; json: a document for tools.",
)
def validate(repo: Path, channels_dir: Path | None, max_file_size: int, output_format: str) -> None:
    """Check a config repo against every rule and list every error in one pass.

    Each error reads PATH:LINE:COL: RULE MESSAGE (JSON-POINTER). Exit status: 0 valid,
    1 invalid, 2 the repo could not be read or the command line is wrong. REPO defaults to the
    current directory.
    """
    validation = _load(repo, channels_dir, max_file_size)
    if output_format == "json":
        click.echo(json.dumps(_validation_json(repo, validation), indent=2, sort_keys=True))
    else:
        for diagnostic in validation.diagnostics:
            click.echo(diagnostic.format())
        click.echo(_summary(repo, validation), err=not validation.valid)
    sys.exit(EXIT_OK if validation.valid else EXIT_INVALID)


@cli.command()
@repo_argument
@click.option("--runtime", "runtime_name", required=True, help="The runtime to render.")
@click.option(
    "--module",
    "modules",
    multiple=True,
    help="Only this module (repeat for several).",
)
@channels_option
@max_size_option
def render(
    repo: Path,
    runtime_name: str,
    modules: Sequence[str],
    channels_dir: Path | None,
    max_file_size: int,
) -> None:
    """Print the objects a runtime should run, as a YAML stream.

    Modules come in dependency order, each headed by a comment with its version and where the
    version came from; inside a module CRDs and Namespaces come first and the default
    configuration last. Every object carries the reconciler's labels and annotations.
    """
    config = _valid_repo(repo, channels_dir, max_file_size)
    runtime = config.runtimes.get(runtime_name)
    if runtime is None:
        raise NotFoundError(
            f"runtime '{runtime_name}' does not exist" + did_you_mean(runtime_name, config.runtimes)
        )
    resolution = resolve_runtime(config, runtime)
    unknown = [m for m in modules if resolution.module(m) is None]
    if unknown:
        names = [m.name for m in resolution.modules]
        raise NotFoundError(
            f"runtime '{runtime_name}' does not run module '{unknown[0]}'"
            + did_you_mean(unknown[0], names)
            + f" (it runs: {', '.join(names)})"
        )
    click.echo(render_stream(config, resolution, modules), nl=False)


def render_stream(config: ConfigRepo, resolution: Resolution, modules: Sequence[str]) -> str:
    """The YAML stream of ``render``: a comment per module, then its objects."""
    renderer = Renderer(config)
    chunks = [f"# runtime {resolution.runtime.name} (channel {resolution.runtime.channel})\n"]
    for resolved in resolution.modules:
        if modules and resolved.name not in modules:
            continue
        chunks.append(
            f"# module {resolved.name} {resolved.version}: {resolved.origin()}, "
            f"{resolved.reason()}, strategy {resolved.strategy}\n"
        )
        single = Resolution(resolution.runtime, (resolved,))
        for rendered in renderer.render(single):
            chunks.append("---\n")
            chunks.append(yaml.dump(dict(rendered.body), Dumper=_Dumper, sort_keys=False))
    return "".join(chunks)


def _load(repo: Path, channels_dir: Path | None, max_file_size: int) -> Validation:
    options = ReadOptions(max_file_size=max_file_size, channels_dir=channels_dir)
    return load_repo(repo, options)


def _valid_repo(repo: Path, channels_dir: Path | None, max_file_size: int) -> ConfigRepo:
    validation = _load(repo, channels_dir, max_file_size)
    if validation.repo is None:
        raise ConfigError(validation.diagnostics)
    return validation.repo


def _summary(repo: Path, validation: Validation) -> str:
    if validation.repo is not None:
        config = validation.repo
        versions = sum(len(m.versions) for m in config.modules.values())
        return (
            f"{repo}: valid: {len(config.runtimes)} runtimes, {len(config.modules)} modules "
            f"({versions} versions), {len(config.channels)} channels, {validation.files} files"
        )
    files = len({d.path for d in validation.diagnostics})
    count = len(validation.diagnostics)
    return f"{repo}: {count} error{'s' * (count != 1)} in {files} file{'s' * (files != 1)}"


def _validation_json(repo: Path, validation: Validation) -> dict[str, Any]:
    result: dict[str, Any] = {
        "repo": str(repo),
        "valid": validation.valid,
        "files": validation.files,
        "errors": [d.to_json() for d in validation.diagnostics],
    }
    if validation.repo is not None:
        result["runtimes"] = sorted(validation.repo.runtimes)
        result["modules"] = {
            name: sorted(m.versions) for name, m in sorted(validation.repo.modules.items())
        }
        result["channels"] = sorted(validation.repo.channels)
    return result


def _fail(error: ReconcilerError) -> NoReturn:
    if isinstance(error, ConfigError):
        for diagnostic in error.diagnostics:
            click.echo(diagnostic.format(), err=True)
        _print_diagnostic_summary(error.diagnostics)
        sys.exit(EXIT_INVALID)
    click.echo(f"error: {error}", err=True)
    sys.exit(EXIT_ERROR)


def _print_diagnostic_summary(diagnostics: Sequence[Diagnostic]) -> None:
    click.echo(
        f"the config repo is invalid ({len(diagnostics)} errors); nothing rendered", err=True
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: run the CLI and map our errors to exit codes."""
    try:
        cli.main(args=list(argv) if argv is not None else None, standalone_mode=False)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as error:
        error.show()
        sys.exit(EXIT_ERROR)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(EXIT_ERROR)
    except ReconcilerError as error:
        _fail(error)
