"""The daemon's notifier, composed from its options: a
:class:`~reconciler.notify.delivery.Delivery` reading the endpoints of the commit in force,
the endpoints' secrets from ``--notification-secrets-dir`` and from labelled Secrets of
``--secret-namespace``, and recording Events there (the daemon's own cluster, connected at
first use; none with ``--snapshot``), counting outcomes in the daemon's metrics.

Caller: ``reconciler daemon`` (:func:`reconciler.cli.daemon.run_daemon`).
"""

from __future__ import annotations

from pathlib import Path

from reconciler.cli.options import ClusterOptions, user_cache_dir
from reconciler.cluster.api import Cluster
from reconciler.core.endpoints import NotificationSettings
from reconciler.daemon.service import Daemon
from reconciler.notify.delivery import Delivery
from reconciler.notify.events import NotificationEvents
from reconciler.notify.home import HomeCluster
from reconciler.notify.secrets import SecretReader, secrets_of


def notifier_for(daemon: Daemon, secrets_dir: Path | None, clusters: ClusterOptions) -> Delivery:
    """The notifier of ``daemon`` (see the module docstring)."""

    def in_force() -> NotificationSettings:
        repo = daemon.state.repo
        return repo.settings.notifications if repo is not None else NotificationSettings()

    if clusters.snapshot is not None:  # a rehearsal reaches no cluster of its own
        return Delivery(in_force, SecretReader(secrets_dir), report=daemon.metrics)

    def connect() -> Cluster:
        from reconciler.cluster.kube import connect_home  # the client only when needed

        return connect_home(cache_dir=clusters.cache_dir or user_cache_dir())

    home = HomeCluster(connect)
    namespace = clusters.secret_namespace
    return Delivery(
        in_force,
        SecretReader(secrets_dir, secrets_of(home, namespace)),
        events=NotificationEvents(home, namespace),
        report=daemon.metrics,
    )
