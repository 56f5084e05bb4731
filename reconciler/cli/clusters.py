"""How the command line reaches clusters and the state store: a live cluster through the
Kubernetes client (imported only then), or a recorded snapshot file; the store of a rehearsal
beside its snapshot. Used by ``diff``, ``sync`` and ``daemon`` when they run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from reconciler.cli.options import ClusterOptions, user_cache_dir
from reconciler.cluster.api import Cluster
from reconciler.cluster.snapshot import SnapshotFileCluster, check_runtime_of
from reconciler.core.diagnostics import did_you_mean
from reconciler.core.model import ClusterAccess, Settings
from reconciler.errors import SnapshotError

if TYPE_CHECKING:
    from reconciler.operations.runner import Connect


@dataclass(frozen=True, slots=True)
class Access:
    """How the CLI reaches each runtime's cluster: a live one, or a snapshot file."""

    options: ClusterOptions
    #: The config repo's settings (their ``spec.kubeClient`` rate, under the flags').
    settings: Settings | None = None
    #: Keep each snapshot file's cluster between connections (one command's run, where
    #: :meth:`release` is called); the daemon reads the file at each connection instead.
    reuse_snapshots: bool = True
    #: Snapshot files read in this run, by path: each stage of an operation connects again,
    #: and reading a file once is enough (it is saved after every change, so the file and the
    #: cluster in memory never differ). :meth:`release` forgets a runtime's.
    _snapshots: dict[Path, SnapshotFileCluster] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_snapshot(self.options)
        if self.options.snapshot is not None and (self.options.kubeconfig or self.options.context):
            raise click.UsageError(
                "--snapshot reads recorded clusters: give it without --kubeconfig and --context"
            )

    def connect(
        self, access: ClusterAccess, name: str, *, settings: Settings | None = None
    ) -> Cluster:
        """The cluster of runtime ``name``; with a snapshot, its file, saved after each change.
        ``settings`` (else :attr:`settings`) give the client rate where no flag does."""
        if self.options.snapshot is not None:
            path = snapshot_file(self.options.snapshot, name)
            cluster = self._snapshots.get(path) if self.reuse_snapshots else None
            if cluster is None:
                cluster = SnapshotFileCluster(path)
                check_runtime_of(cluster, path, name)
                if self.reuse_snapshots:
                    self._snapshots[path] = cluster
            return cluster
        from reconciler.cluster.kube import connect  # the client is imported only when needed
        from reconciler.cluster.kube_client import RequestTimeout

        timeout = self.options.timeout
        return connect(
            access,
            name=name,
            kubeconfig_dir=self.options.kubeconfig_dir,
            secret_namespace=self.options.secret_namespace,
            rate=self.options.rate(settings or self.settings),
            cache_dir=self.options.cache_dir or user_cache_dir(),
            timeout=RequestTimeout(timeout) if timeout is not None else None,
            kubeconfig=self.options.kubeconfig,
            context=self.options.context,
        )

    def following(self, settings_of: Callable[[], Settings | None]) -> Connect:
        """:meth:`connect` at the client rate of the settings ``settings_of`` gives at each
        connection (the daemon's commit in force changes them)."""

        def connect(access: ClusterAccess, name: str) -> Cluster:
            return self.connect(access, name, settings=settings_of())

        return connect

    def release(self, name: str) -> None:
        """Forget runtime ``name``'s snapshot cluster (its run is over; memory stays flat)."""
        if self.options.snapshot is not None:
            self._snapshots.pop(snapshot_file(self.options.snapshot, name), None)


def check_snapshot(options: ClusterOptions) -> None:
    """Refuse a ``--snapshot`` path that does not exist (:class:`SnapshotError`, one line with
    the closest name beside it): a typo must not read as empty clusters, where ``diff`` plans
    to install everything. ``--snapshot-create`` asks for empty clusters on purpose."""
    snapshot = options.snapshot
    if snapshot is None or options.snapshot_create or Path(snapshot).exists():
        return
    path = Path(snapshot.rstrip("/") or "/")
    try:
        beside = [p.name for p in path.parent.iterdir()] if path.parent.is_dir() else []
    except OSError:
        beside = []
    raise SnapshotError(
        f"--snapshot {snapshot}: no such file or folder{did_you_mean(path.name, beside)} "
        "(to rehearse on empty clusters, create it with sync --snapshot-create)"
    )


def is_folder(snapshot: str) -> bool:
    """Whether ``--snapshot`` names a folder of ``<runtime>.yaml`` files (existing, or ``.../``)."""
    return snapshot.endswith("/") or Path(snapshot).is_dir()


def snapshot_file(snapshot: str, runtime: str) -> Path:
    """The snapshot file of ``runtime``."""
    return Path(snapshot) / f"{runtime}.yaml" if is_folder(snapshot) else Path(snapshot)


def state_url_for(ctx: click.Context, state_url: str, snapshot: str | None) -> str:
    """Rehearsals never share a store with real runs: with ``--snapshot`` and no ``--state``
    (nor RECONCILER_STATE), the store lives beside the snapshot."""
    explicit = ctx.get_parameter_source("state_url") is not click.core.ParameterSource.DEFAULT
    if snapshot is None or explicit:
        return state_url
    if is_folder(snapshot):
        return f"sqlite:///{Path(snapshot).resolve() / 'reconciler-state.db'}"
    return f"sqlite:///{Path(snapshot).resolve().with_suffix('.state.db')}"


def now() -> datetime:
    """The time of the wall clock, in UTC."""
    return datetime.now(UTC)
