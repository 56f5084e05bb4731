"""``reconciler daemon``: follow a git ref and keep every runtime converged until SIGTERM.

The command line becomes a few frozen values (:class:`GitOptions`, :class:`HttpOptions`,
:class:`ScheduleOptions`); the git source, the scheduler (apscheduler), the HTTP server
(waitress) and the metrics (prometheus_client) are imported only when the daemon starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from reconciler.cli import exits
from reconciler.cli.notifying import NotifyOptions, notification_options
from reconciler.cli.options import (
    GIT_TIMEOUT_ENV,
    ClusterOptions,
    Duration,
    cluster_options,
    debugging,
    default_state_url,
    listen_address,
    retention_of,
    retention_options,
    state_option,
)
from reconciler.cli.signing import (
    trusted_keys_options,
    trusted_keys_secret_option,
    with_secret,
)
from reconciler.cli.watching import watch_options
from reconciler.errors import AccessError, SourceError

if TYPE_CHECKING:
    import logging

    from reconciler.config.remotes import CredentialHost
    from reconciler.core.model import Settings
    from reconciler.daemon.http import HttpServer
    from reconciler.daemon.service import Daemon
    from reconciler.notify.secrets import TokenHost
    from reconciler.notify.transport import Network
    from reconciler.operations.model import Retention
    from reconciler.operations.store import StateStore
    from reconciler.source.git import GitCredentials
    from reconciler.source.signatures import TrustedKeys


def credential_hosts_option(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[CredentialHost, ...]:
    """``--credential-host`` values as (host, port), or a usage error naming the bad one."""
    from reconciler.config.remotes import parse_credential_host

    try:
        return tuple(parse_credential_host(value) for value in values)
    except ValueError as error:
        raise click.BadParameter(str(error), ctx, param) from None


def _log() -> logging.Logger:
    """The daemon's logger (``logging`` is imported when it logs, not by every command)."""
    import logging

    return logging.getLogger("reconciler.daemon")


@click.command(epilog=exits.DAEMON.describe())
@click.option(
    "--repo",
    "repo_url",
    required=True,
    envvar="RECONCILER_REPO",
    help="Git URL (https, ssh, git://) or local path of the config repository.",
)
@click.option(
    "--branch",
    default="main",
    show_default=True,
    envvar="RECONCILER_BRANCH",
    help="Branch, tag or commit id to follow.",
)
@click.option(
    "--path",
    "repo_path",
    default=".",
    show_default=True,
    envvar="RECONCILER_PATH",
    help="Folder of the config repo inside the git repository.",
)
@click.option(
    "--interval",
    type=Duration(),
    default="60s",
    show_default="spec.intervals.poll, else 60s",
    envvar="RECONCILER_INTERVAL",
    help="How often to ask the remote whether the ref moved; given here or in the "
    "environment, it overrides spec.intervals.poll of the config repo.",
)
@click.option(
    "--resync-interval",
    type=Duration(),
    default="10m",
    show_default="spec.intervals.resync, else 10m",
    envvar="RECONCILER_RESYNC_INTERVAL",
    help="How often every runtime is reconciled against drift (10% jitter); given here or in "
    "the environment, it overrides spec.intervals.resync of the config repo.",
)
@click.option(
    "--listen",
    default="0.0.0.0:8080",
    callback=listen_address,
    show_default=True,
    envvar="RECONCILER_LISTEN",
    help="Address of /healthz, /readyz, /metrics, /status, the status page (/) and /hooks/git.",
)
@cluster_options(one_cluster=False, create=True)
@state_option
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    envvar="RECONCILER_WORKERS",
    help="Runtimes reconciled at once.",
)
@click.option(
    "--member",
    default="",
    envvar="RECONCILER_MEMBER",
    help="This replica's name among the daemons sharing the state store (default: host:pid; "
    "in Kubernetes, the pod name). A restart under the same name takes the member over at "
    "once; two running processes must never share one.",
)
@watch_options
@click.option(
    "--lease",
    type=Duration(),
    default="30s",
    show_default=True,
    envvar="RECONCILER_LEASE",
    help="A replica without a heartbeat for this long is dead: its runtimes go to the others "
    "(it stops writing after half of it).",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="RECONCILER_CACHE_DIR",
    help="Where fetched commits are kept (default: next to a SQLite state store; with "
    "PostgreSQL, under the default state folder); pulled chart sources are kept in the folder "
    "'sources' beside it unless RECONCILER_SOURCE_CACHE names one.",
)
@click.option(
    "--webhook-secret-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    envvar="RECONCILER_WEBHOOK_SECRET_FILE",
    help="Secret of /hooks/git signatures (GitHub) or tokens (GitLab); without it /hooks/git "
    "answers 403. Without --api-token-file it is also the Bearer token of /sync, /suspend, "
    "/resume and /rollout (a warning says so at start).",
)
@click.option(
    "--api-token-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    envvar="RECONCILER_API_TOKEN_FILE",
    help="Bearer token of POST /sync, /suspend, /resume and /rollout (reconciler sync|suspend|"
    "resume|rollout --daemon URL --secret-file FILE), apart from the webhook secret, which "
    "the git host holds too; without either those answer 403.",
)
@click.option(
    "--allow-unauthenticated-sync",
    is_flag=True,
    envvar="RECONCILER_ALLOW_UNAUTHENTICATED_SYNC",
    help="POST /sync without a token (anyone who reaches the port can ask for a reconcile).",
)
@click.option(
    "--http-read-timeout",
    type=Duration(),
    default="10s",
    show_default=True,
    envvar="RECONCILER_HTTP_READ_TIMEOUT",
    help="A request's headers and body must arrive within it (else 408); idle connections close.",
)
@click.option(
    "--http-max-connections",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    envvar="RECONCILER_HTTP_MAX_CONNECTIONS",
    help="Open HTTP connections at once; past it, the oldest idle or unfinished one is "
    "closed for a new one.",
)
@click.option(
    "--http-max-connections-per-client",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    envvar="RECONCILER_HTTP_MAX_CONNECTIONS_PER_CLIENT",
    help="Open HTTP connections of one client address; past it, that client's oldest idle or "
    "unfinished one is closed.",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    envvar="RECONCILER_TOKEN_FILE",
    help="Token for https remotes, sent as 'Authorization: Bearer' only to the host of --repo "
    "and each --credential-host (never logged).",
)
@click.option(
    "--ssh-key-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    envvar="RECONCILER_SSH_KEY_FILE",
    help="Private key for ssh remotes, offered only to the host of --repo and each "
    "--credential-host.",
)
@click.option(
    "--credential-host",
    "credential_hosts",
    multiple=True,
    metavar="HOST[:PORT]",
    callback=credential_hosts_option,
    envvar="RECONCILER_CREDENTIAL_HOSTS",
    help="Another host --token-file and --ssh-key-file may go to (repeatable; in the "
    "environment, separated by spaces), e.g. where channelsFrom.git lives. Without a port, "
    "https's 443 for the token and ssh's 22 for the key. A remote on any other host, such as "
    "a channelsFrom.git that a commit names, is asked without credentials.",
)
@click.option(
    "--allow-deletions",
    "allow_commit",
    default="",
    metavar="COMMIT",
    envvar="RECONCILER_ALLOW_DELETIONS",
    help="Let this one commit (its id, or a prefix of 7 or more characters) pass the deletion "
    "brake; later commits are braked again.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    envvar="RECONCILER_LOG_FORMAT",
    help="One line per event: text, or one JSON object per line (for log shippers).",
)
@click.option(
    "--git-timeout",
    type=Duration(),
    default="60s",
    show_default=True,
    envvar=GIT_TIMEOUT_ENV,
    help="Time limit of each git call to a remote; a call past it is stopped and reported.",
)
@retention_options
@trusted_keys_options()
@trusted_keys_secret_option
@notification_options
@click.pass_context
def daemon(
    ctx: click.Context,
    repo_url: str,
    branch: str,
    repo_path: str,
    interval: float,
    resync_interval: float,
    listen: tuple[str, int],
    clusters: ClusterOptions,
    state_url: str,
    workers: int,
    member: str,
    watch: bool | None,
    debounce: float,
    lease: float,
    cache_dir: Path | None,
    webhook_secret_file: Path | None,
    api_token_file: Path | None,
    allow_unauthenticated_sync: bool,
    http_read_timeout: float,
    http_max_connections: int,
    http_max_connections_per_client: int,
    token_file: Path | None,
    ssh_key_file: Path | None,
    credential_hosts: tuple[CredentialHost, ...],
    allow_commit: str,
    log_format: str,
    git_timeout: float,
    keep_operations: int,
    keep_failures: float,
    trusted_keys: TrustedKeys,
    trusted_keys_secret: str,
    notification_secrets_dir: Path | None,
    notification_token_hosts: tuple[TokenHost, ...],
    notification_allowed_networks: tuple[Network, ...],
    notification_timeout: float | None,
) -> None:
    """Follow a git ref and keep every runtime converged until SIGTERM.

    Polls the remote (one cheap check per interval), validates each new commit as a whole
    (an invalid one is refused and the last good one stays in force), holds commits over the
    deletion brake, and runs each runtime's operation on a pool of workers; resyncs every
    runtime for drift. With trusted keys (--trusted-*), a commit not signed by one of them is
    refused. Every option can be set from the environment (RECONCILER_REPO, ...).
    """
    from reconciler.cli.clusters import state_url_for
    from reconciler.daemon.logs import setup_logging

    check_local_repo(repo_url)
    trusted_keys = with_secret(trusted_keys, clusters.secret_namespace, trusted_keys_secret)
    if trusted_keys.every_commit and not trusted_keys.configured:
        raise click.UsageError("--verify-every-commit needs trusted keys (--trusted-*)")
    setup_logging(log_format)
    state_url = state_url_for(ctx, state_url, clusters.snapshot)  # a rehearsal keeps its own store
    run_daemon(
        GitOptions(
            repo_url,
            branch,
            repo_path,
            cache_dir,
            token_file,
            ssh_key_file,
            git_timeout,
            credential_hosts,
        ),
        HttpOptions(
            listen,
            webhook_secret_file,
            allow_unauthenticated_sync,
            http_read_timeout,
            http_max_connections,
            http_max_connections_per_client,
            api_token_file,
        ),
        ScheduleOptions(
            given_duration(ctx, "interval", interval),
            given_duration(ctx, "resync_interval", resync_interval),
            workers,
            allow_commit,
            debugging(ctx),
            member,
            timedelta(seconds=lease),
            retention_of(keep_operations, keep_failures),
            watch,
            given_duration(ctx, "debounce", debounce),
            trusted_keys if trusted_keys.configured else None,
        ),
        replace(clusters, cache_dir=cache_dir),
        state_url,
        NotifyOptions(
            notification_secrets_dir,
            notification_token_hosts,
            notification_allowed_networks,
            notification_timeout,
        ),
    )


def check_local_repo(repo_url: str) -> None:
    """Stop at start when ``--repo`` is a local path that does not exist or is no git
    repository (:class:`SourceError`, exit 2): no later poll can fix that, and the daemon would
    otherwise retry it for ever as if the remote were down."""
    from reconciler.config.remotes import is_local

    if not is_local(repo_url):
        return
    path = Path(repo_url).expanduser()
    if not path.exists():
        raise SourceError(f"--repo {repo_url}: no such folder (give a git URL or a local clone)")
    if not ((path / ".git").exists() or (path / "HEAD").is_file()):
        raise SourceError(f"--repo {repo_url}: not a git repository (no .git, not a bare one)")


def given_duration(ctx: click.Context, name: str, seconds: float) -> timedelta | None:
    """A duration option given on the command line or in the environment; ``None`` when it
    is its default (the config repo's setting then applies)."""
    source = ctx.get_parameter_source(name)
    given = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)
    return timedelta(seconds=seconds) if source in given else None


@dataclass(frozen=True, slots=True)
class GitOptions:
    """The followed repository and how git reaches it."""

    repo_url: str
    branch: str
    repo_path: str
    cache_dir: Path | None
    token_file: Path | None
    ssh_key_file: Path | None
    timeout: float
    #: ``--credential-host``: where the credentials may go besides the host of ``repo_url``.
    credential_hosts: tuple[CredentialHost, ...] = ()


@dataclass(frozen=True, slots=True)
class HttpOptions:
    """The HTTP port: address, the webhook and /sync secret, limits."""

    listen: tuple[str, int]
    webhook_secret_file: Path | None
    allow_unauthenticated_sync: bool
    read_timeout: float
    max_connections: int
    max_per_client: int = 20
    #: ``--api-token-file``: the commands' token, apart from the webhook secret.
    api_token_file: Path | None = None


def _default_retention() -> Retention:
    from reconciler.operations.model import Retention  # not paid for by the other commands

    return Retention()


@dataclass(frozen=True, slots=True)
class ScheduleOptions:
    """How often to poll and resync (``None``: as the config repo's ``spec.intervals`` say),
    how many runtimes at once, which commit may delete, whether bugs show tracebacks."""

    interval: timedelta | None
    resync_interval: timedelta | None
    workers: int
    allow_commit: str
    debug: bool = False
    #: ``--member`` and ``--lease``: this replica among those sharing the store.
    member: str = ""
    lease: timedelta = timedelta(seconds=30)
    #: ``--keep-operations`` and ``--keep-failures``: what the state store keeps.
    retention: Retention = field(default_factory=_default_retention)
    #: ``--watch/--no-watch`` and ``--debounce`` when given (else the config repo's).
    watch: bool | None = None
    debounce: timedelta | None = None
    #: ``--trusted-*``: the keys every commit must be signed with (None: not verified).
    trusted_keys: TrustedKeys | None = None


def run_daemon(
    git: GitOptions,
    http: HttpOptions,
    schedule: ScheduleOptions,
    clusters: ClusterOptions,
    state_url: str,
    notify: NotifyOptions | None = None,
) -> None:
    """Start the daemon, its HTTP port and its scheduler; stop them on SIGTERM or SIGINT."""
    from reconciler.cli.clusters import Access, now
    from reconciler.cli.notifying import notifier_for
    from reconciler.daemon.service import Daemon, DaemonOptions, start_scheduler
    from reconciler.daemon.signals import StopSignals
    from reconciler.operations.store import open_store
    from reconciler.render import default_renderer
    from reconciler.source.git import GitRunner, RemoteSource

    _check_keys(schedule.trusted_keys)
    access = Access(clusters, reuse_snapshots=False)  # workers run runtimes side by side
    store = open_store(state_url)
    _check_store(store)
    beside = getattr(store, "path", None) or Path(default_state_url().removeprefix("sqlite:///"))
    cache = git.cache_dir or Path(beside).parent / "git-cache"
    credentials = _git_credentials(git)
    git_runner = GitRunner(git.timeout)
    # the command line may name a local path; a commit (channelsFrom.git) may not
    source = RemoteSource(
        git.repo_url, git.branch, git.repo_path, cache, credentials, local=True, runner=git_runner
    )
    options = DaemonOptions(
        workers=schedule.workers,
        allow_deletions=schedule.allow_commit,
        poll_interval=schedule.interval,
        resync_interval=schedule.resync_interval,
        debug=schedule.debug,
        member=schedule.member,
        lease=schedule.lease,
        retention=schedule.retention,
        watch=schedule.watch,
        debounce=schedule.debounce,
        trusted_keys=schedule.trusted_keys,
    )

    def second_source(url: str, ref: str, path: str) -> RemoteSource:
        channels_cache = cache.with_name(cache.name + "-channels")
        return RemoteSource(url, ref, path, channels_cache, credentials, runner=git_runner)

    def settings_in_force() -> Settings | None:
        repo = the_daemon.state.repo
        return repo.settings if repo is not None else None

    connect = access.following(settings_in_force)  # the client rate of the commit in force
    # pulled sources (docs/sources.md) beside the fetched commits, unless the environment says
    renderer = default_renderer(source_cache=cache.with_name("sources"))
    the_daemon = Daemon(
        source, store, connect, now, options, make_source=second_source, renderer=renderer
    )
    notifier = notifier_for(the_daemon, notify or NotifyOptions(), clusters)
    the_daemon.notifier = notifier
    # installed before any thread works or the port answers: SIGTERM never ends it by default
    stop = StopSignals()  # whichever thread the kernel hands SIGTERM to, the main one wakes
    stop.install()
    try:
        notifier.start()  # what a stop or a crash left in the outbox goes out now
        server = _serve(the_daemon, http)
        scheduler = start_scheduler(the_daemon)
    except BaseException:
        stop.uninstall()  # a start that failed (in-process: tests) leaves the signals as found
        raise
    host, port = http.listen
    _log().info(  # through the log, so --log-format json holds for every line
        "reconciler daemon following %s %s (%s); listening on %s:%s",
        source.shown,
        git.branch,
        git.repo_path,
        host,
        port,
    )
    stop.wait()
    _log().info("stopping: letting running steps finish")
    the_daemon.stopping.set()  # first: no run or step starts while the jobs below end
    git_runner.stop()  # a poll waiting on a remote ends now, so shutdown does not wait for it
    scheduler.shutdown(wait=True)
    the_daemon.close()
    notifier.close()  # what is queued is tried once more, without waiting between tries
    server.shutdown()
    server.server_close()


def _check_keys(trusted_keys: TrustedKeys | None) -> None:
    """Read the trusted keys once at start: a key file to fix stops the daemon here (one line,
    exit 2) rather than making every commit wait."""
    if trusted_keys is None:
        return
    from reconciler.source.signatures import check_trusted_keys

    found = check_trusted_keys(trusted_keys)
    _log().info("verifying commit signatures: %s (%s)", trusted_keys.describe(), found)


def _check_store(store: StateStore) -> None:
    """A damaged SQLite store stops the daemon before it starts (one line naming the file and
    what to do), instead of failing at its first read of a damaged page."""
    from reconciler.operations.store import check_store

    try:
        check_store(store)
    except BaseException:
        close = getattr(store, "close", None)
        if close is not None:
            close()
        raise


def _serve(the_daemon: Daemon, http: HttpOptions) -> HttpServer:
    """The HTTP port, serving; the daemon is closed when the port cannot be opened."""
    from reconciler.daemon.http import HttpLimits, serve

    secret = _secret_of(http.webhook_secret_file, "--webhook-secret-file")
    api_token = _secret_of(http.api_token_file, "--api-token-file")
    if secret is not None and api_token is None:
        _log().warning(
            "the webhook secret is also the Bearer token of POST /sync, /suspend, /resume and "
            "/rollout (the git host holds it too): give those their own with --api-token-file"
        )
    limits = HttpLimits(
        read_timeout=max(1, round(http.read_timeout)),
        max_connections=http.max_connections,
        max_per_client=http.max_per_client,
    )
    host, port = http.listen
    try:
        return serve(
            the_daemon,
            host,
            port,
            secret,
            allow_unauthenticated_sync=http.allow_unauthenticated_sync,
            limits=limits,
            api_token=api_token,
        )
    except OSError as error:
        the_daemon.close()
        raise AccessError(f"cannot listen on {host}:{port}: {error.strerror or error}") from error


def _secret_of(file: Path | None, flag: str) -> bytes | None:
    """The secret in ``file`` (``None`` without one); an empty file is refused."""
    secret = file.read_bytes().strip() if file is not None else None
    if secret == b"":
        raise click.BadParameter("the file is empty", param_hint=flag)
    return secret


def _git_credentials(git: GitOptions) -> GitCredentials:
    """The daemon's credentials, bound to the host of ``--repo`` and the ``--credential-host``
    ones; a token that would break the header it goes in is refused, without repeating it."""
    from reconciler.config.remotes import repo_credential_host
    from reconciler.source.git import GitCredentials

    token = git.token_file.read_text().strip() if git.token_file is not None else None
    if token is not None and (not token or any(ord(c) < 0x21 or ord(c) == 0x7F for c in token)):
        raise click.BadParameter(
            "the token is empty or holds spaces or control characters", param_hint="--token-file"
        )
    own = repo_credential_host(git.repo_url)
    hosts = (own, *git.credential_hosts) if own is not None else git.credential_hosts
    return GitCredentials(token, git.ssh_key_file, hosts)
