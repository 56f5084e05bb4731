"""``reconciler render``: the objects one runtime should run, as a YAML stream."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from reconciler.cli import exits
from reconciler.cli.options import (
    RepoInput,
    channels_option,
    complete_runtime,
    max_size_option,
    repo_argument,
)
from reconciler.cli.output import output_option
from reconciler.errors import NotFoundError

if TYPE_CHECKING:
    from reconciler.core.model import ConfigRepo
    from reconciler.core.render import RenderedObject
    from reconciler.core.resolve import Resolution


@click.command(epilog=exits.RENDER.describe())
@repo_argument
@click.option(
    "--runtime",
    "runtime_name",
    required=True,
    shell_complete=complete_runtime,
    help="The runtime to render.",
)
@click.option(
    "--module",
    "modules",
    multiple=True,
    help="Only this module (repeat for several).",
)
@channels_option
@max_size_option
@output_option(
    "yaml",
    "json",
    default="yaml",
    help="yaml: a YAML stream with a comment per module; json: a kind: List of the objects "
    "(as kubectl get -o json prints, for kubectl apply -f -).",
)
@click.option(
    "--show-secrets",
    is_flag=True,
    help="Print the values of Secrets' data and stringData (masked as *** without it).",
)
def render(
    repo: Path,
    runtime_name: str,
    modules: Sequence[str],
    channels_dir: Path | None,
    max_file_size: int,
    output_format: str,
    show_secrets: bool,
) -> None:
    """Print the objects a runtime should run, as a YAML stream.

    Modules come in dependency order, each headed by a comment with its version and where the
    version came from; inside a module CRDs and Namespaces come first and the default
    configuration last. Every object carries the reconciler's labels and annotations. The
    values of Secrets are masked (***) unless --show-secrets is given.
    """
    from reconciler.cli.loading import load_valid_repo
    from reconciler.core.diagnostics import did_you_mean
    from reconciler.core.resolve import resolve_runtime

    config = load_valid_repo(RepoInput(repo, channels_dir, max_file_size))
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
    if output_format == "json":
        listed = render_list(config, resolution, modules, show_secrets=show_secrets)
        click.echo(json.dumps(listed, indent=2))
    else:
        stream = render_stream(config, resolution, modules, show_secrets=show_secrets)
        click.echo(stream, nl=False)


def render_list(
    config: ConfigRepo,
    resolution: Resolution,
    modules: Sequence[str],
    *,
    show_secrets: bool = False,
) -> dict[str, Any]:
    """``render -o json``: the objects as a ``v1`` ``List``, in the order of the stream."""
    from reconciler.core.render import Renderer

    wanted = [m for m in resolution.modules if not modules or m.name in modules]
    only = replace(resolution, modules=tuple(wanted))
    shown = _shown(show_secrets)
    items = [shown(rendered.body) for rendered in Renderer(config).render(only)]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _shown(show_secrets: bool) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """How an object is printed: as it is, or with Secrets' values masked (S4)."""
    from reconciler.core.fielddiff import masked_secret

    return dict if show_secrets else masked_secret


def render_stream(
    config: ConfigRepo,
    resolution: Resolution,
    modules: Sequence[str],
    *,
    show_secrets: bool = False,
) -> str:
    """The YAML stream of ``render``: a comment per module, then its objects."""
    import yaml

    from reconciler.core.render import Renderer
    from reconciler.core.resolve import Resolution

    shown = _shown(show_secrets)

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    renderer = Renderer(config)
    chunks = [f"# runtime {resolution.runtime.name} (channel {resolution.runtime.channel})\n"]
    for resolved in resolution.modules:
        if modules and resolved.name not in modules:
            continue
        chunks.append(
            f"# module {resolved.name} {resolved.version}: {resolved.origin()}, "
            f"{resolved.reason()}, strategy {resolved.strategy}\n"
        )
        chunks.extend(_hook_comments(config, resolution.runtime.name, resolved.name))
        single = Resolution(resolution.runtime, (resolved,))
        for rendered in renderer.render(single):
            chunks.append("---\n")
            chunks.extend(_enforced_comments(rendered))
            chunks.append(yaml.dump(shown(rendered.body), Dumper=dumper, sort_keys=False))
    return "".join(chunks)


def _hook_comments(config: ConfigRepo, runtime: str, module: str) -> list[str]:
    """A chart's hooks, never objects of the stream: ``# hook pre-install: Job/x, ...`` per
    phase they run in (in order), or ``# hooks skipped (spec.hooks: Skip), never run: ...``."""
    from reconciler.config.templates import hooks_text
    from reconciler.core.hooks import phases_text
    from reconciler.core.model import HookPolicy

    rendered = config.rendered.get((runtime, module))
    if rendered is None or not rendered.hooks:
        return []
    if config.modules[module].hooks is HookPolicy.SKIP:
        return [f"# hooks skipped (spec.hooks: Skip), never run: {hooks_text(rendered)}\n"]
    return [f"# hook {line}\n" for line in phases_text(rendered.hooks)]


def _enforced_comments(rendered: RenderedObject) -> list[str]:
    """``# enforced by channel regular: spec.logLevel``: one line per source of overrides."""
    if rendered.override is None:
        return []
    by_source: dict[str, list[str]] = {}
    for enforced in rendered.override.fields:
        by_source.setdefault(enforced.source, []).append(enforced.dotted)
    return [f"# enforced by {source}: {', '.join(paths)}\n" for source, paths in by_source.items()]
