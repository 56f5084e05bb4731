"""Reading the config repo a command names: the loader's options from the command line, and the
channels repository of ``channelsFrom.git`` fetched into the user's cache.

Imported by the commands that read a repo (``validate``, ``render``, ``diff``, ``sync``) when
they run; ``reconciler.source.git`` only when the repo reads its channels from
a git repository.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import click

from reconciler.cli.options import GIT_TIMEOUT_ENV, RepoInput, user_cache_dir
from reconciler.config.schema import SchemaChecker
from reconciler.config.validate import Validation
from reconciler.core.durations import parse_duration
from reconciler.core.model import ConfigRepo
from reconciler.core.templates import Capabilities, RenderCache
from reconciler.errors import ConfigError
from reconciler.render import default_renderer
from reconciler.source.loader import ReadOptions, channels_repository, load_repo
from reconciler.source.schemas import schema_checker as cached_checker


def schema_checker() -> SchemaChecker:
    """The schema checker of a command: its compiled checks kept in the user's cache folder."""
    return cached_checker(user_cache_dir() / "schemas")


def read_options(source: RepoInput) -> ReadOptions:
    """The loader's options that ``--max-file-size`` and ``--channels`` give."""
    return ReadOptions(max_file_size=source.max_file_size, channels_dir=source.channels_dir)


def load_validation(
    source: RepoInput,
    capabilities: Mapping[str, Capabilities] | None = None,
    render_cache: RenderCache | None = None,
) -> Validation:
    """Read and validate the repo (fetching ``channelsFrom.git`` first when it names one), its
    charts rendered for each runtime's recorded ``capabilities`` (else the engine's)."""
    options = read_options(source)
    if source.channels_dir is None and source.repo.is_dir():
        options = _with_git_channels(source.repo, options)
    return load_repo(
        source.repo,
        options,
        schema_checker(),
        renderer=default_renderer(),
        render_cache=render_cache,
        capabilities=capabilities,
    )


def load_valid_repo(
    source: RepoInput,
    capabilities: Mapping[str, Capabilities] | None = None,
    render_cache: RenderCache | None = None,
) -> ConfigRepo:
    """The valid repo; :class:`ConfigError` (exit 1) with every diagnostic otherwise."""
    validation = load_validation(source, capabilities, render_cache)
    if validation.repo is None:
        raise ConfigError(validation.diagnostics)
    return validation.repo


def git_timeout(text: str) -> float:
    """Seconds of a ``--git-timeout`` / ``RECONCILER_GIT_TIMEOUT`` duration such as ``60s``."""
    try:
        seconds = parse_duration(text.strip())
    except ValueError:
        seconds = 0.0
    if seconds <= 0:
        raise click.BadParameter(
            f"git timeout must be a duration above zero such as 60s or 2m ({GIT_TIMEOUT_ENV})"
        )
    return seconds


def _with_git_channels(repo: Path, options: ReadOptions) -> ReadOptions:
    """``channelsFrom.git``: fetch the channels repository's ref into the user's cache, within
    the git time limit (``RECONCILER_GIT_TIMEOUT``). A remote git may not fetch for a commit
    is never fetched (``channels_repository`` leaves it out; validation reports it)."""
    wanted = channels_repository(repo)
    if wanted is None:
        return options
    import hashlib

    from reconciler.source.git import GitRunner, RemoteSource  # imports git: only when needed

    key = hashlib.sha256(wanted.url.encode()).hexdigest()[:16]
    source = RemoteSource(
        wanted.url,
        wanted.ref,
        wanted.sub_path,
        user_cache_dir() / f"channels-{key}",
        runner=GitRunner(git_timeout(os.environ.get(GIT_TIMEOUT_ENV, "60s"))),
    )
    commit = source.check()
    tree = source.revision(commit).tree
    return replace(options, channels_tree=tree, channels_label=f"{source.shown}@{commit[:12]}")
