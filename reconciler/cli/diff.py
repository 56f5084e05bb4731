"""``reconciler diff``: what would change, changing nothing, in live clusters (a dry run of
``sync``), or across the whole fleet between two git revisions (the plan of a pull request).

The fleet diff (``--base``) reads git and plans without a cluster; it never imports the state
store, the operations engine or the Kubernetes client (unless ``--live``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from reconciler.cli import exits
from reconciler.cli.options import (
    ClusterOptions,
    RepoInput,
    RunRequest,
    allow_option,
    channels_option,
    cluster_options,
    max_size_option,
    parallel_option,
    repo_argument,
    runtimes_option,
    state_option,
)
from reconciler.cli.output import document, document_text, is_document, output_option
from reconciler.cli.progress import announce_repo
from reconciler.cli.signing import (
    need_keys,
    print_verdict,
    trusted_keys_options,
    verify_checkout,
    verify_option,
)
from reconciler.errors import ConfigError

if TYPE_CHECKING:
    from reconciler.cli.report import Style
    from reconciler.core.fleetdiff import FleetDiff
    from reconciler.core.model import ConfigRepo
    from reconciler.core.plan_values import LiveModule
    from reconciler.review.fleet import Review
    from reconciler.source.signatures import TrustedKeys


@click.command(epilog=f"{exits.LIVE_DIFF.describe()}\n\n{exits.FLEET_DIFF.describe()}")
@repo_argument
@runtimes_option
@click.option(
    "--base",
    "base_rev",
    metavar="REV",
    help="Compare the whole fleet with this git revision of the repository holding REPO "
    "(a branch, tag, commit or HEAD~1); no cluster needed.",
)
@click.option(
    "--head",
    "head_rev",
    metavar="REV",
    help="With --base/--base-path: the revision to compare (default: the working tree).",
)
@click.option(
    "--base-path",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Compare with the config repo in this folder (e.g. a separate checkout of the target "
    "branch) instead of a git revision.",
)
@click.option(
    "--live",
    is_flag=True,
    help="With --base/--base-path: plan against each runtime's live cluster instead of "
    "assuming the base revision is what runs (running versions, blocking objects).",
)
@cluster_options()
@output_option(
    "text",
    "json",
    "yaml",
    "markdown",
    help="json/yaml: a versioned document (docs/json-output.md); markdown (fleet diffs only) "
    "fits a pull-request comment.",
)
@click.option(
    "--details/--no-details",
    default=None,
    help="Object changes and field diffs (default: on for live diffs, off for fleet diffs).",
)
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    is_flag=False,
    flag_value="always",
    help="auto: on a terminal unless NO_COLOR is set; always: also when piped (--color alone "
    "says always); never.",
)
@click.option("--no-color", "no_color", is_flag=True, hidden=True)  # the older spelling of never
@click.option(
    "--now",
    type=click.DateTime(formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"]),
    help="Judge maintenance windows at this UTC time instead of now (e.g. the planned merge).",
)
@click.option("--timings", is_flag=True, help="Print the time of each phase to stderr.")
@parallel_option
@state_option
@allow_option
@channels_option
@max_size_option
@verify_option
@trusted_keys_options()
@click.pass_context
def diff(
    ctx: click.Context,
    repo: Path,
    runtime_names: Sequence[str],
    base_rev: str | None,
    head_rev: str | None,
    base_path: Path | None,
    live: bool,
    clusters: ClusterOptions,
    output_format: str,
    details: bool | None,
    color: str,
    no_color: bool,
    now: datetime | None,
    timings: bool,
    parallel: int,
    state_url: str,
    allow_deletions: Sequence[str],
    channels_dir: Path | None,
    max_file_size: int,
    verify: bool,
    trusted_keys: TrustedKeys,
) -> None:
    """Show what would change, changing nothing: in live clusters, or across the whole fleet
    between two revisions.

    Without --base: per runtime, per module (install, upgrade, reconfigure, unchanged, removal,
    blocked or deferred, with a reason), per object (+ create, ~ update with field diffs,
    - delete) against each runtime's cluster; Secret values are masked. Runtimes the state store
    knows that left git are shown as deprovisions, with the deletion brake's verdict.

    With --base REV (or --base-path DIR): the fleet-wide plan of a pull request, no cluster
    needed: a summary per module change ("serverless 1.2.0 -> 1.3.0 upgrade on 37 runtimes: 30
    now, 5 in their maintenance window, 2 held: downgrade"), then every runtime's changes, each
    with its cause (the file and field that made it). With --verify, the head (and with
    --verify-every-commit every commit since --base) must be signed by a trusted key first.
    """
    when = now.replace(tzinfo=UTC) if now else datetime.now(UTC)
    source = RepoInput(repo, channels_dir, max_file_size)
    clusters.check_one_runtime(runtime_names)
    if verify and base_rev is None and base_path is None:
        raise click.UsageError("--verify needs --base or --base-path (it checks git commits)")
    if base_rev is not None or base_path is not None:
        request = FleetRequest(repo, base_rev, head_rev, base_path, runtime_names, when, state_url)
        if verify and not _signed(request, trusted_keys):
            sys.exit(exits.USAGE)
        view = FleetView(output_format, bool(details), "never" if no_color else color, timings)
        sys.exit(fleet_diff(request, view, source, clusters if live or clusters.snapshot else None))
    if output_format == "markdown":
        raise click.UsageError("-o markdown needs --base or --base-path")
    announce_repo(repo, sys.stderr)
    from reconciler.cli.clusters import state_url_for

    store_url = state_url_for(ctx, state_url, clusters.snapshot)
    run = RunRequest(source, clusters, store_url, runtime_names, allow_deletions)
    sys.exit(live_diff(run, when, output_format, details is not False, parallel))


def _signed(request: FleetRequest, trusted_keys: TrustedKeys) -> bool:
    """``--verify``: whether the head side (and, with ``--verify-every-commit``, every commit
    since the base revision) is signed by a trusted key; the verdict on stderr."""
    need_keys(trusted_keys)
    verdict = verify_checkout(request.repo, trusted_keys, request.head_rev, request.base_rev)
    print_verdict(verdict)
    return verdict.accepted


def live_diff(
    run: RunRequest, when: datetime, output_format: str, details: bool, parallel: int = 1
) -> int:
    """Print each runtime's plan against its cluster; the exit status of ``diff``."""
    from reconciler.cli.plans import PlanView, open_scope, show_plans
    from reconciler.cli.report import plans_json

    scope = open_scope(run, parallel, to_change=False, document=is_document(output_format))
    view = PlanView(
        output_format,
        details,
        lambda results, errors: plans_json([r.plan for r in results], errors),
        "LiveDiff",
    )
    planned = show_plans(scope, scope.access, when, view, parallel)
    return planned.exit_status(changes=exits.DIFF_CHANGES)


@dataclass(frozen=True, slots=True)
class FleetRequest:
    """The two sides of a fleet diff and what to keep of it."""

    repo: Path
    base_rev: str | None
    head_rev: str | None
    base_path: Path | None
    runtimes: Sequence[str]
    now: datetime
    #: The store whose recorded capabilities the charts of both sides render with.
    state_url: str = ""


@dataclass(frozen=True, slots=True)
class FleetView:
    """How a fleet diff is printed (``--format``, ``--details``, ``--color``, ``--timings``)."""

    output_format: str
    details: bool
    color: str
    timings: bool


def fleet_diff(
    request: FleetRequest, view: FleetView, source: RepoInput, clusters: ClusterOptions | None
) -> int:
    """Print the fleet diff between the two sides; the exit status of ``diff --base``. With
    ``clusters`` (``--live``/``--snapshot``), plans against what each cluster runs."""
    from reconciler.cli.capabilities import RecordedCapabilities, say_capabilities
    from reconciler.cli.loading import read_options, schema_checker
    from reconciler.review.fleet import Review, Side  # only for fleet diffs

    recorded = RecordedCapabilities(request.state_url)
    review = Review(read_options(source), checker=schema_checker(), capabilities=recorded)
    try:
        if request.base_path is not None:
            base_side = Side(request.repo, folder=request.base_path)
        else:
            base_side = Side(request.repo, request.base_rev)
        base, head = review.load_both(base_side, Side(request.repo, request.head_rev))
    except ConfigError as error:
        exits.exit_status_of(error)
        return exits.USAGE
    if not is_document(view.output_format):
        say_capabilities(head[0], recorded, request.runtimes)
    live = None if clusters is None else _observe(review, head[0], clusters)
    fleet = _only(review.compare(base, head, request.now, live), request.runtimes)
    with review.timings.phase("render"):
        text = _fleet_text(fleet, view)
        if view.output_format == "text":
            text += _waves_text(base[0], head[0], fleet)
    click.echo(text, nl=False, color=colour_enabled(view.color))  # --color survives a pipe
    if view.timings:
        click.echo(f"timings: {review.timings.format()}", err=True)
    if not fleet.has_changes:
        return exits.OK
    return exits.HELD if fleet.needs_second_look else exits.DIFF_CHANGES


def _observe(
    review: Review, head: ConfigRepo, clusters: ClusterOptions
) -> dict[str, dict[str, LiveModule]]:
    from reconciler.cli.clusters import Access
    from reconciler.lifecycle.executor import Lifecycle

    access = Access(clusters, head.settings)
    return review.observe(
        head,
        lambda config, name: Lifecycle(
            access.connect(config.runtimes[name].cluster, name),
            system_namespace=config.settings.system_namespace,
        ),
    )


def _fleet_text(fleet: FleetDiff, view: FleetView) -> str:
    from reconciler.cli.report import fleet_markdown, fleet_text

    if is_document(view.output_format):
        return document_text(document("FleetDiff", fleet.to_json()), view.output_format)
    if view.output_format == "markdown":
        return fleet_markdown(fleet)
    return fleet_text(fleet, details=view.details, style=_style(view.color))


def _waves_text(base: ConfigRepo, head: ConfigRepo, fleet: FleetDiff) -> str:
    """The waves the daemon would roll the head out in, for the runtimes it changes that the
    base has too (by the policy in force at the base, not the head's own alone:
    :func:`~reconciler.core.rollouts.governing_policy`); empty without a policy or a change."""
    own, in_force = head.settings.rollout, base.settings.rollout
    if own is None and in_force is None:
        return ""
    from reconciler.core.rollouts import governing_policy, plan_waves  # only with a policy

    policy = governing_policy(own, in_force)
    names = [r.runtime for r in fleet.runtimes if r.runtime in base.runtimes]
    names = [name for name in names if name in head.runtimes]
    if policy is None or not names:
        return ""
    waves = plan_waves(policy, [head.runtimes[name] for name in names])
    minutes, seconds = divmod(int(policy.healthy_for.total_seconds()), 60)
    hours, minutes = divmod(minutes, 60)
    took = "".join(f"{n}{u}" for n, u in ((hours, "h"), (minutes, "m"), (seconds, "s")) if n)
    whose = "spec.rollout" if own == policy else "spec.rollout in force at the base"
    lines = [f"\nrollout waves ({whose}, each healthy for {took or '0s'}):"]
    for index, wave in enumerate(waves, 1):
        shown = ", ".join(wave.runtimes[:8])
        more = f" and {len(wave.runtimes) - 8} more" if len(wave.runtimes) > 8 else ""
        count = len(wave.runtimes)
        lines.append(
            f"  {index}. {wave.name} ({wave.chosen_by}): {count} runtime(s): {shown}{more}"
        )
    if own != policy:
        lines.append("  (the head's own spec.rollout applies to the rollouts after this one)")
    return "\n".join(lines) + "\n"


def _only(fleet: FleetDiff, names: Sequence[str]) -> FleetDiff:
    if not names:
        return fleet
    from reconciler.core.fleetdiff import FleetDiff

    kept = tuple(r for r in fleet.runtimes if r.runtime in names)
    return FleetDiff(fleet.base, fleet.head, kept, fleet.unchanged)


def colour_enabled(color: str) -> bool:
    """``--color always`` or ``never`` as said; ``auto``: on a terminal, unless ``NO_COLOR``
    is set to anything (https://no-color.org)."""
    if color != "auto":
        return color == "always"
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _style(color: str) -> Style:
    if not colour_enabled(color):
        return lambda text, colour: text
    return lambda text, colour: click.style(
        text, fg=None if colour == "bold" else colour, bold=colour == "bold"
    )
