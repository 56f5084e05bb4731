"""The daemon's notifier, from its command line: the options (``--notification-secrets-dir``,
``--notification-token-host``) and :func:`notifier_for`, which composes a
:class:`~reconciler.notify.delivery.Delivery` reading the endpoints of the commit in force,
the endpoints' secrets from the folder and from labelled Secrets of ``--secret-namespace``,
recording Events there (the daemon's own cluster, connected at first use; none with
``--snapshot``), counting outcomes in the daemon's metrics, keeping each notification in the
daemon's state store until it is sent (the outbox, claimed under the daemon's member name). The
delivery and the Kubernetes client are imported only when the daemon starts.

Caller: ``reconciler daemon`` (:mod:`reconciler.cli.daemon`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from reconciler.cli.options import Duration

if TYPE_CHECKING:
    from reconciler.cli.options import ClusterOptions
    from reconciler.daemon.service import Daemon
    from reconciler.notify.delivery import Delivery
    from reconciler.notify.secrets import TokenHost
    from reconciler.notify.transport import Network

F = TypeVar("F", bound=Callable[..., object])


@dataclass(frozen=True, slots=True)
class NotifyOptions:
    """``--notification-secrets-dir``, ``--notification-token-host``,
    ``--notification-allow-network`` and ``--notification-timeout``."""

    secrets_dir: Path | None = None
    token_hosts: tuple[TokenHost, ...] = ()
    allowed_networks: tuple[Network, ...] = ()
    timeout: float | None = None


def _networks(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[Network, ...]:
    import ipaddress

    try:
        return tuple(ipaddress.ip_network(value.strip(), strict=False) for value in values)
    except ValueError as error:
        raise click.BadParameter(f"{error} (a network such as 10.0.0.0/8)", ctx, param) from None


def _token_hosts(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[TokenHost, ...]:
    from reconciler.config.remotes import parse_credential_host

    try:
        return tuple(parse_credential_host(value) for value in values)
    except ValueError as error:
        raise click.BadParameter(str(error), ctx, param) from None


def notification_options(command: F) -> F:
    """The daemon's notification options (parameters ``notification_secrets_dir``,
    ``notification_token_hosts``, ``notification_allowed_networks`` and
    ``notification_timeout``)."""
    secrets_dir = click.option(
        "--notification-secrets-dir",
        type=click.Path(file_okay=False, exists=True, path_type=Path),
        envvar="RECONCILER_NOTIFICATION_SECRETS_DIR",
        help="Folder of the files that spec.notifications endpoints name in urlFrom/tokenFrom "
        "(a mounted Secret); a file elsewhere is never read.",
    )
    token_hosts = click.option(
        "--notification-token-host",
        "notification_token_hosts",
        multiple=True,
        metavar="HOST[:PORT]",
        callback=_token_hosts,
        envvar="RECONCILER_NOTIFICATION_TOKEN_HOSTS",
        help="A host a notification endpoint's token may go to over https, besides "
        "api.github.com and gitlab.com (repeatable; in the environment, separated by spaces); "
        "a token for any other URL is not sent.",
    )
    allow_network = click.option(
        "--notification-allow-network",
        "notification_allowed_networks",
        multiple=True,
        metavar="CIDR",
        callback=_networks,
        envvar="RECONCILER_NOTIFICATION_ALLOW_NETWORKS",
        help="A network whose private, loopback or link-local addresses notification endpoints "
        "may reach (repeatable; in the environment, separated by spaces), e.g. the cluster's "
        "service network; without it only public addresses are reached (a commit names the "
        "endpoints).",
    )
    timeout = click.option(
        "--notification-timeout",
        "notification_timeout",
        type=Duration(),
        default="15s",
        show_default=True,
        envvar="RECONCILER_NOTIFICATION_TIMEOUT",
        help="Time one notification request may take in all, its whole answer included; an "
        "endpoint that answers slower fails that try (tried again later, in its own lane).",
    )
    return secrets_dir(token_hosts(allow_network(timeout(command))))


def notifier_for(daemon: Daemon, options: NotifyOptions, clusters: ClusterOptions) -> Delivery:
    """The notifier of ``daemon`` (see the module docstring)."""
    from reconciler.cli.options import user_cache_dir
    from reconciler.cluster.api import Cluster
    from reconciler.core.endpoints import NotificationSettings
    from reconciler.notify.delivery import Delivery
    from reconciler.notify.events import NotificationEvents
    from reconciler.notify.home import HomeCluster
    from reconciler.notify.outbox import Claimant
    from reconciler.notify.secrets import SecretReader, TokenHosts, secrets_of
    from reconciler.notify.transport import DEADLINE, HttpTransport

    hosts = TokenHosts(options.token_hosts)
    transport = HttpTransport(
        deadline=options.timeout or DEADLINE, allowed=options.allowed_networks
    )
    membership = daemon.membership
    outbox = Claimant(daemon.store, membership.name, membership.alive, daemon.clock)

    def in_force() -> NotificationSettings:
        repo = daemon.state.repo
        return repo.settings.notifications if repo is not None else NotificationSettings()

    if clusters.snapshot is not None:  # a rehearsal reaches no cluster of its own
        reader = SecretReader(options.secrets_dir)
        return Delivery(
            in_force,
            reader,
            transport=transport,
            report=daemon.metrics,
            token_hosts=hosts,
            outbox=outbox,
        )

    def connect() -> Cluster:
        from reconciler.cluster.kube import connect_home  # the client only when needed
        from reconciler.cluster.kube_client import RequestTimeout

        timeout = RequestTimeout(clusters.timeout) if clusters.timeout is not None else None
        return connect_home(cache_dir=clusters.cache_dir or user_cache_dir(), timeout=timeout)

    home = HomeCluster(connect)
    namespace = clusters.secret_namespace
    return Delivery(
        in_force,
        SecretReader(options.secrets_dir, secrets_of(home, namespace)),
        transport=transport,
        events=NotificationEvents(home, namespace),
        report=daemon.metrics,
        token_hosts=hosts,
        outbox=outbox,
    )
