"""``reconciler validate``: check a config repo and list every error in one pass."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from reconciler.cli import exits
from reconciler.cli.options import (
    RepoInput,
    channels_option,
    max_size_option,
    repo_argument,
    state_option,
)
from reconciler.cli.output import echo_document, is_document, output_option
from reconciler.cli.signing import (
    need_keys,
    print_verdict,
    trusted_keys_options,
    verdict_json,
    verify_checkout,
    verify_option,
)

if TYPE_CHECKING:
    from reconciler.config.validate import Validation
    from reconciler.source.signatures import TrustedKeys


@click.command(epilog=exits.VALIDATE.describe())
@repo_argument
@channels_option
@max_size_option
@output_option(
    "text",
    "json",
    "yaml",
    help="text: one compiler-style line per error; json/yaml: a versioned document "
    "(docs/json-output.md).",
)
@verify_option
@trusted_keys_options(every_commit=False)
@state_option
def validate(
    repo: Path,
    channels_dir: Path | None,
    max_file_size: int,
    output_format: str,
    verify: bool,
    trusted_keys: TrustedKeys,
    state_url: str,
) -> None:
    """Check a config repo against every rule and list every error in one pass.

    Each error reads PATH:LINE:COL: RULE MESSAGE (JSON-POINTER). Values that Kubernetes reads in
    a surprising way (y as true, 0777 as 511; docs/yaml.md) are warnings, PATH:LINE:COL: warning
    RULE MESSAGE, and do not change the exit status. REPO defaults to the current directory.
    With --verify, the commit checked out must also be signed by a trusted key, and REPO hold
    no uncommitted change. Charts render with the .Capabilities the last sync recorded of each
    runtime's cluster in the state store (--state), else the engine's defaults: a line on stderr
    says which.
    """
    from reconciler.cli.capabilities import RecordedCapabilities, say_capabilities
    from reconciler.cli.loading import load_validation

    if verify:
        need_keys(trusted_keys)
    recorded = RecordedCapabilities(state_url)
    validation = load_validation(RepoInput(repo, channels_dir, max_file_size), recorded)
    if validation.repo is not None and not is_document(output_format):
        say_capabilities(validation.repo, recorded)
    verdict = verify_checkout(repo, trusted_keys) if verify else None
    if is_document(output_format):
        document = _validation_json(repo, validation)
        if verdict is not None:
            document["signatures"] = verdict_json(verdict)
        echo_document("Validation", document, output_format)
    else:
        for diagnostic in validation.diagnostics:
            click.echo(diagnostic.format())
        for warning in validation.warnings:
            click.echo(_warning_line(warning.format()))
        click.echo(_summary(repo, validation), err=not validation.valid)
        if verdict is not None:
            print_verdict(verdict)
    signed = verdict is None or verdict.accepted
    sys.exit(exits.OK if validation.valid and signed else exits.VALIDATE_INVALID)


def _warning_line(formatted: str) -> str:
    """``path:line:col: warning RULE message``: a warning reads like an error, marked."""
    place, _, rest = formatted.partition(": ")
    return f"{place}: warning {rest}"


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
    from reconciler.core.versions import sorted_versions

    result: dict[str, Any] = {
        "repo": str(repo),
        "valid": validation.valid,
        "files": validation.files,
        "errors": [d.to_json() for d in validation.diagnostics],
        "warnings": [d.to_json() for d in validation.warnings],
    }
    config = validation.repo  # the same keys whether valid or not: empty when invalid
    result["runtimes"] = sorted(config.runtimes) if config else []
    result["modules"] = (
        {name: sorted_versions(list(m.versions)) for name, m in sorted(config.modules.items())}
        if config
        else {}
    )
    result["channels"] = sorted(config.channels) if config else []
    return result
