"""Options and parameter types that several commands share, and the values they build.

Imports nothing heavier than click: every command module declares its options from here at
import time, and ``reconciler --help`` must stay quick. The frozen dataclasses group what the
options say so that no function below a click callback takes a long parameter list.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from reconciler.core.durations import parse_duration
from reconciler.core.model import ClientRate, Settings
from reconciler.errors import UnreadableError

if TYPE_CHECKING:  # completion's types, imported only when a shell asks
    from click.shell_completion import CompletionItem

    from reconciler.operations.model import Retention

F = TypeVar("F", bound=Callable[..., Any])

#: The default limit of a YAML file's size (C6); the loader's ``DEFAULT_MAX_FILE_SIZE``.
DEFAULT_MAX_FILE_SIZE = 5 * 1024 * 1024
#: The time limit of git calls to a remote (daemon: also ``--git-timeout``).
GIT_TIMEOUT_ENV = "RECONCILER_GIT_TIMEOUT"
#: Show tracebacks of internal errors (also ``--debug``).
DEBUG_ENV = "RECONCILER_DEBUG"


@dataclass(frozen=True, slots=True)
class RepoInput:
    """Which config repo a command reads and how: ``REPO``, ``--channels``, ``--max-file-size``."""

    repo: Path
    channels_dir: Path | None
    max_file_size: int


@dataclass(frozen=True, slots=True)
class ClusterOptions:
    """How a command reaches each runtime's cluster: live (kubeconfig files or Secrets) or a
    recorded snapshot (``--kubeconfig-dir``, ``--secret-namespace``, ``--snapshot``)."""

    kubeconfig_dir: Path | None
    secret_namespace: str
    snapshot: str | None = None
    #: Requests per second to one API server (``--kube-qps``); None: the settings' value.
    qps: float | None = None
    #: Requests at once to one API server (``--kube-burst``); None: the settings' value.
    burst: int | None = None
    #: Where discovery is cached between runs (default: :func:`user_cache_dir`).
    cache_dir: Path | None = None
    #: ``--snapshot-create``: a ``--snapshot`` path that does not exist starts empty clusters
    #: (a first rehearsal) instead of being refused as a typo.
    snapshot_create: bool = False
    #: The most seconds a request waits for a byte of the answer (``--kube-timeout``); None:
    #: the client's default (see :mod:`reconciler.cluster.kube_client`).
    timeout: float | None = None
    #: ``--kubeconfig``: the kubeconfig file of every runtime's cluster, over ``spec.cluster``
    #: (as kubectl's flag; None: KUBECONFIG, else ~/.kube/config, where one is used).
    kubeconfig: Path | None = None
    #: ``--context``: the kubeconfig context of every runtime's cluster, over ``spec.cluster``
    #: (None: with ``--kubeconfig``, the file's current context).
    context: str | None = None

    def check_one_runtime(self, runtime_names: Sequence[str]) -> None:
        """``--kubeconfig`` and ``--context`` point one runtime at one cluster: refused (a
        usage error) unless ``--runtime`` names exactly one, so a sync never writes (nor
        deprovisions) every runtime of the fleet in the one cluster they name."""
        if (self.kubeconfig or self.context) and len(set(runtime_names)) != 1:
            raise click.UsageError(
                "--kubeconfig and --context reach one runtime's cluster: name it with --runtime"
            )

    def rate(self, settings: Settings | None) -> ClientRate:
        """The client rate per API server: the flags where given, else the settings'
        ``spec.kubeClient``, else kubectl's defaults."""
        fallback = settings.client_rate if settings is not None else ClientRate()
        return ClientRate(
            self.qps if self.qps is not None else fallback.qps,
            self.burst if self.burst is not None else fallback.burst,
        )


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/reconciler``, else ``~/.cache/reconciler``: fetched channels, discovery."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "reconciler"


class Duration(click.ParamType[float, Any]):
    """A duration above zero such as ``45s``, ``10m`` or ``1h30m``, as seconds."""

    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            return value
        try:
            seconds = parse_duration(str(value).strip())
        except ValueError:
            seconds = 0.0
        if seconds <= 0:
            self.fail(f"{str(value)[:40]!r} is not a duration above zero such as 45s, 10m or 1h30m")
        return seconds


def listen_address(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, int]:
    """``HOST:PORT`` with a port from 0 (any free port) to 65535."""
    host, _, port = value.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise click.BadParameter(f"{value[:60]!r} is not HOST:PORT (a port from 0 to 65535)")
    return host or "0.0.0.0", int(port)  # noqa: S104 (a server; /sync and /hooks/git need the secret)


def debugging(ctx: click.Context) -> bool:
    """Whether the global ``--debug`` (``RECONCILER_DEBUG``) asks for tracebacks of bugs."""
    return bool(ctx.find_root().params.get("debug"))


def default_state_url() -> str:
    """The default ``--state``: ``sqlite:///`` a file under the user's state directory
    (XDG_STATE_HOME), computed when a command runs (without importing the store: click computes
    it for every command that has the option, ``diff`` too)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return f"sqlite:///{Path(base) / 'reconciler' / 'state.db'}"


#: ``--keep-operations`` and ``--keep-failures``, one definition for the daemon's pruning job
#: and ``operations prune``; their defaults are :class:`~reconciler.operations.model.Retention`'s
#: (a test keeps them equal).
keep_operations_option = click.option(
    "--keep-operations",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    envvar="RECONCILER_KEEP_OPERATIONS",
    help="Finished operations kept per runtime: the newest (a run of operations that changed "
    "nothing counts as one). The daemon prunes the others every hour; `reconciler operations "
    "prune` when run.",
)
keep_failures_option = click.option(
    "--keep-failures",
    type=Duration(),
    default="168h",
    show_default=True,
    envvar="RECONCILER_KEEP_FAILURES",
    help="Failed operations are kept this long (168h: 7 days), beyond --keep-operations.",
)


def retention_options(command: F) -> F:
    """``--keep-operations`` and ``--keep-failures`` (as :func:`retention_of` reads them)."""
    return keep_operations_option(keep_failures_option(command))


def retention_of(keep_operations: int, keep_failures: float) -> Retention:
    """What :func:`retention_options` say the state store keeps."""
    from datetime import timedelta

    from reconciler.operations.model import Retention  # not paid for by every command's import

    return Retention(keep_operations, timedelta(seconds=keep_failures))


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
snapshot_option = click.option(
    "--snapshot",
    type=click.Path(),
    help="Use a recorded cluster instead of a live one: a YAML or JSON file of objects (one "
    "runtime) or a folder of <runtime>.yaml files (an existing folder, or a path ending in /). "
    "sync writes the result back as a JSON List (not with --dry-run). A path that does not "
    "exist is refused (a typo is no empty cluster), unless --snapshot-create.",
)
snapshot_create_option = click.option(
    "--snapshot-create",
    is_flag=True,
    help="With --snapshot: a path that does not exist yet stands for empty clusters, created "
    "at the first write (a first rehearsal).",
)
kubeconfig_dir_option = click.option(
    "--kubeconfig-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    envvar="RECONCILER_KUBECONFIG_DIR",
    help="Folder of the kubeconfig files that runtimes name in spec.cluster.kubeconfigFile.",
)
kube_qps_option = click.option(
    "--kube-qps",
    type=click.FloatRange(min=0, min_open=True),
    envvar="RECONCILER_KUBE_QPS",
    help="Requests per second to one API server, shared by every runtime on it "
    "[default: spec.kubeClient.qps of the settings, else 50 as kubectl].",
)
kube_burst_option = click.option(
    "--kube-burst",
    type=click.IntRange(min=1),
    envvar="RECONCILER_KUBE_BURST",
    help="Requests that may go at once to one API server after a quiet spell "
    "[default: spec.kubeClient.burst of the settings, else 300 as kubectl].",
)
kube_timeout_option = click.option(
    "--kube-timeout",
    type=Duration(),
    envvar="RECONCILER_KUBE_TIMEOUT",
    help="The most time a request to an API server waits for its answer to go on (not the "
    "total; connecting: at most 10s), then fails to be retried; watches are not limited "
    "[default: 60s].",
)
kubeconfig_option = click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Reach every selected runtime's cluster through this kubeconfig file instead of its "
    "spec.cluster, as kubectl does (with --context: that context; else the file's current "
    "one). sync, diff and check need one --runtime with it. KUBECONFIG, unlike it, only "
    "replaces ~/.kube/config for spec.cluster.context runtimes.",
)
context_option = click.option(
    "--context",
    help="Reach every selected runtime's cluster through this context of the kubeconfig "
    "(--kubeconfig, else KUBECONFIG, else ~/.kube/config) instead of its spec.cluster, as "
    "kubectl does; sync, diff and check need one --runtime with it.",
)


secret_namespace_option = click.option(
    "--secret-namespace",
    default="reconciler-system",
    show_default=True,
    help="Namespace of the Secrets that runtimes name in spec.cluster.kubeconfigSecret.",
)


#: Runtimes worked on at once by default: the work waits on API servers, not on this process.
DEFAULT_PARALLEL = 8
parallel_option = click.option(
    "--parallel",
    type=click.IntRange(min=1, max=256),
    default=DEFAULT_PARALLEL,
    show_default=True,
    envvar="RECONCILER_PARALLEL",
    help="Runtimes worked on at once (they wait on their API servers; one snapshot file for "
    "all runtimes is worked on one at a time).",
)


def cluster_options(*, one_cluster: bool = True, create: bool = False) -> Callable[[F], F]:
    """How a command reaches clusters, as one ``clusters`` parameter (a :class:`ClusterOptions`)
    built from ``--snapshot``, ``--kubeconfig-dir``, ``--secret-namespace``, ``--kube-qps``,
    ``--kube-burst``, ``--kube-timeout``; with ``one_cluster``, ``--kubeconfig`` and
    ``--context`` too (kubectl's one cluster for every runtime); with ``create``,
    ``--snapshot-create``."""
    options = [kube_timeout_option, kube_burst_option, kube_qps_option, secret_namespace_option]
    options += [kubeconfig_dir_option]
    options += [context_option, kubeconfig_option] if one_cluster else []
    options += [snapshot_create_option] if create else []

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def taking_clusters(*args: Any, **kwargs: Any) -> Any:
            return command(*args, clusters=_clusters_of(kwargs), **kwargs)

        decorated: Any = taking_clusters
        for option in [*options, snapshot_option]:
            decorated = option(decorated)
        return cast(F, decorated)

    return decorate


def _clusters_of(given: dict[str, Any]) -> ClusterOptions:
    """The :class:`ClusterOptions` of :func:`cluster_options`' parameters, taken out of
    ``given`` (a click callback's keyword arguments)."""
    return ClusterOptions(
        given.pop("kubeconfig_dir"),
        given.pop("secret_namespace"),
        given.pop("snapshot"),
        given.pop("kube_qps"),
        given.pop("kube_burst"),
        snapshot_create=given.pop("snapshot_create", False),
        timeout=given.pop("kube_timeout"),
        kubeconfig=given.pop("kubeconfig", None),
        context=given.pop("context", None),
    )


def complete_runtime(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Shell completion of runtime names: the ``runtimes/*.yaml`` files of the command's REPO
    (the current directory by default), read as names only (nothing is parsed). click parses
    nothing after an option that still waits for its value, so REPO is also looked for among
    the words being completed (``COMP_WORDS``, set by the bash, zsh and fish scripts)."""
    repo = Path(str(ctx.params.get("repo") or "."))
    words = os.environ.get("COMP_WORDS", "").split()
    given = [
        Path(w) for w in words[1:] if not w.startswith("-") and (Path(w) / "runtimes").is_dir()
    ]
    if given:
        repo = given[0]
    try:
        names = sorted(p.stem for p in (repo / "runtimes").glob("*.yaml"))
    except OSError:
        return []
    from click.shell_completion import CompletionItem

    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


runtimes_option = click.option(
    "--runtime",
    "runtime_names",
    multiple=True,
    shell_complete=complete_runtime,
    help="Only this runtime (repeat for several; default: every runtime).",
)


def _warn_password_in_argv(ctx: click.Context, param: click.Parameter, url: str) -> str:
    """A password in ``--state`` on the command line shows in ``ps`` to every user of the host:
    said once on stderr (the URL itself never)."""
    from reconciler.core.redaction import url_passwords

    given = ctx.get_parameter_source(param.name or "") is click.core.ParameterSource.COMMANDLINE
    if given and url_passwords(url):
        click.echo(
            "warning: the --state URL carries a password, which every user of this host can "
            "read in the process list (ps); give the URL in RECONCILER_STATE, or the password "
            "in a PGPASSFILE or PGPASSWORD",
            err=True,
        )
    return url


def state_given(ctx: click.Context) -> bool:
    """Whether ``--state`` was named (on the command line or in ``RECONCILER_STATE``) rather
    than left at its default: a named store that does not exist is a mistake (a typo, a
    relative path read from another folder), the default one not yet created is a first day."""
    source = ctx.get_parameter_source("state_url")
    return source in (
        click.core.ParameterSource.COMMANDLINE,
        click.core.ParameterSource.ENVIRONMENT,
    )


def missing_store_error(state_url: str) -> UnreadableError:
    """The one line for a named SQLite store that does not exist: its path as given and, when
    relative, as read from the current folder."""
    path = state_url.removeprefix("sqlite:///")
    found = Path(os.path.expanduser(path))
    where = "" if found.is_absolute() else f" (read from {Path.cwd()}: {found.absolute()})"
    return UnreadableError(
        f"no state store at {path}{where}: name the store a sync wrote (--state or "
        "RECONCILER_STATE), or run reconciler sync to create it"
    )


state_option = click.option(
    "--state",
    "state_url",
    envvar="RECONCILER_STATE",
    callback=_warn_password_in_argv,
    default=default_state_url,
    show_default="sqlite:///~/.local/state/reconciler/state.db; with --snapshot, "
    "reconciler-state.db beside the snapshot",
    help="The state store of operations and runtime states (RECONCILER_STATE): sqlite:///PATH "
    "or postgresql://USER@HOST[:PORT]/DATABASE. Rehearsals with --snapshot keep a store of "
    "their own unless this is given.",
)
allow_option = click.option(
    "--allow-deletions",
    "allow_deletions",
    multiple=True,
    metavar="COUNT|RUNTIME",
    help="Let this run delete over the deletion brake: up to COUNT runtimes, modules and CRDs, "
    "or those of the RUNTIMEs named (repeat for several).",
)


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What a ``diff`` or ``sync`` against clusters covers, as its command line says."""

    source: RepoInput
    clusters: ClusterOptions
    state_url: str
    runtime_names: Sequence[str] = ()
    allow_deletions: Sequence[str] = ()
