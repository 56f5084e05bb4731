"""``reconciler check``: can every runtime's cluster be reached, as whom, and may that identity
do what a sync needs (as ``flux check --pre``)?

Per runtime: connect (the server's version), ask who we are (SelfSubjectReview), then one
SelfSubjectAccessReview per permission a sync of its modules needs: get, list, patch (server-side
apply) and delete on each kind its manifests hold, in all namespaces; the same on ConfigMaps of
the system namespace (the inventories); get, list and patch on Namespaces; create, get and patch
on Events (unless ``spec.kubernetesEvents`` is off). Nothing is changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from reconciler.cli import exits
from reconciler.cli.options import (
    ClusterOptions,
    RepoInput,
    channels_option,
    cluster_options,
    max_size_option,
    repo_argument,
    runtimes_option,
)
from reconciler.cli.output import Column, echo_document, is_document, output_option, table_lines
from reconciler.errors import NotFoundError, ReconcilerError

if TYPE_CHECKING:
    from reconciler.cli.clusters import Access
    from reconciler.cluster.api import Cluster, Permission
    from reconciler.core.model import ConfigRepo

#: The verbs a sync uses on every kind it manages.
VERBS = ("get", "list", "patch", "delete")


@dataclass(frozen=True, slots=True)
class AccessCheck:
    """What ``check`` found for one runtime."""

    runtime: str
    cluster: str = ""
    reachable: bool = False
    server_version: str = ""
    user: str = ""
    checked: int = 0
    missing: tuple[str, ...] = ()
    error: str = ""

    @property
    def ok(self) -> bool:
        """Reached, and every permission granted."""
        return self.reachable and not self.missing and not self.error

    def row(self) -> tuple[str, ...]:
        """A row of the table."""
        allowed = f"{self.checked - len(self.missing)}/{self.checked}" if self.reachable else "-"
        message = self.error or (
            f"missing: {', '.join(self.missing[:3])}" + (" ..." if len(self.missing) > 3 else "")
            if self.missing
            else "ok"
        )
        return (
            self.runtime,
            "yes" if self.reachable else "no",
            self.server_version or "-",
            self.user or "-",
            allowed,
            message,
        )

    def to_json(self) -> dict[str, Any]:
        """An item of an ``AccessCheckList`` (docs/json-output.md)."""
        return {
            "runtime": self.runtime,
            "cluster": self.cluster,
            "reachable": self.reachable,
            "serverVersion": self.server_version,
            "user": self.user,
            "checked": self.checked,
            "missing": list(self.missing),
            "error": self.error,
            "ok": self.ok,
        }


COLUMNS = [
    Column("RUNTIME"),
    Column("REACHABLE"),
    Column("VERSION"),
    Column("IDENTITY"),
    Column("ALLOWED"),
    Column("MESSAGE"),
]


@click.command(epilog=exits.CHECK.describe())
@repo_argument
@runtimes_option
@cluster_options
@click.option(
    "--parallel",
    type=click.IntRange(min=1, max=64),
    default=8,
    show_default=True,
    help="Runtimes checked at once.",
)
@channels_option
@max_size_option
@output_option("text", "json", "yaml")
def check(
    repo: Path,
    runtime_names: Sequence[str],
    snapshot: str | None,
    kubeconfig_dir: Path | None,
    secret_namespace: str,
    kube_qps: float | None,
    kube_burst: int | None,
    kube_timeout: float | None,
    parallel: int,
    channels_dir: Path | None,
    max_file_size: int,
    output_format: str,
) -> None:
    """Check that every runtime's cluster can be reached, with which identity, and that the
    identity may do what a sync of its modules needs (SelfSubjectAccessReview per kind and
    verb). Changes nothing."""
    from reconciler.cli.clusters import Access
    from reconciler.cli.loading import load_valid_repo

    config = load_valid_repo(RepoInput(repo, channels_dir, max_file_size))
    unknown = [n for n in runtime_names if n not in config.runtimes]
    if unknown:
        raise NotFoundError(f"runtime '{unknown[0]}' does not exist in {repo}")
    names = list(runtime_names) or sorted(config.runtimes)
    clusters = ClusterOptions(
        kubeconfig_dir, secret_namespace, snapshot, kube_qps, kube_burst, timeout=kube_timeout
    )
    access = Access(clusters, config.settings)
    from concurrent.futures import ThreadPoolExecutor  # only this command (startup time)

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        found = list(pool.map(lambda name: check_runtime(config, access, name), names))
    if is_document(output_format):
        echo_document("AccessCheckList", {"items": [f.to_json() for f in found]}, output_format)
    else:
        for line in table_lines(COLUMNS, [f.row() for f in found]):
            click.echo(line)
        for item in found:
            if item.missing:
                click.echo(f"runtime {item.runtime}: missing " + "; ".join(item.missing), err=True)
    ok = sum(1 for f in found if f.ok)
    click.echo(f"{ok} of {len(found)} runtimes ready for sync", err=True)
    raise click.exceptions.Exit(exits.OK if ok == len(found) else exits.CHECK_FAILED)


def check_runtime(config: ConfigRepo, access: Access, name: str) -> AccessCheck:
    """Connect to runtime ``name`` and review the permissions its sync needs."""
    from reconciler.cluster.api import Reviewer

    try:
        cluster = access.connect(config.runtimes[name].cluster, name)
        where = cluster.identity.describe()
        if not isinstance(cluster, Reviewer):
            return AccessCheck(name, where, True, error="this cluster cannot review access")
        version = cluster.server_version()
        user = cluster.whoami()
        needed = needed_permissions(config, name, cluster)
        missing = tuple(p.describe() for p in needed if not cluster.can_i(p))
    except ReconcilerError as error:
        return AccessCheck(name, error=str(error))
    finally:
        access.release(name)
    return AccessCheck(name, where, True, version, user, len(needed), missing)


def needed_permissions(config: ConfigRepo, name: str, cluster: Cluster) -> list[Permission]:
    """The permissions a sync of runtime ``name`` needs (see the module docstring)."""
    from reconciler.cluster.api import Permission

    namespace = config.settings.system_namespace
    resources = set(_resources(_desired_bodies(config, name), cluster))
    wanted = {Permission(v, g, r) for g, r in resources for v in VERBS}
    wanted |= {Permission(v, "", "configmaps", namespace) for v in VERBS}
    wanted |= {Permission(v, "", "namespaces") for v in ("get", "list", "patch")}
    if config.settings.kubernetes_events:
        wanted |= {Permission(v, "", "events") for v in ("create", "get", "patch")}
    return sorted(wanted)


def _desired_bodies(config: ConfigRepo, name: str) -> list[dict[str, Any]]:
    from reconciler.core.render import Renderer
    from reconciler.core.resolve import resolve_runtime

    resolution = resolve_runtime(config, config.runtimes[name])
    return [dict(rendered.body) for rendered in Renderer(config).render(resolution)]


def _resources(bodies: Iterable[dict[str, Any]], cluster: Cluster) -> Iterable[tuple[str, str]]:
    """(group, resource) of every kind among ``bodies``: from discovery, else from the CRD in
    the same manifests (a kind not served until its module is installed)."""
    from reconciler.core.objects import crd_kind

    bodies = list(bodies)
    plurals = {
        crd_kind(body): str(((body.get("spec") or {}).get("names") or {}).get("plural") or "")
        for body in bodies
        if body.get("kind") == "CustomResourceDefinition"
    }
    for body in bodies:
        api_version, kind = str(body.get("apiVersion") or ""), str(body.get("kind") or "")
        group = api_version.rpartition("/")[0]
        info = cluster.kind_info(api_version, kind)
        if info is not None:
            yield info.group, info.plural
        elif plurals.get((group, kind)):
            yield group, plurals[(group, kind)]
