"""``reconciler check``: can every runtime's cluster be reached, as whom, and may that identity
do what a sync and the daemon need (as ``flux check --pre``)?

Per runtime: connect (the server's version), ask who we are (SelfSubjectReview), then one
SelfSubjectAccessReview per permission of :func:`needed_permissions`, the one list of what the
lifecycle and the daemon ask of a managed cluster (``reconciler rbac`` prints it as a role).
Each permission comes from the calls that use it (the tables below); a call added to the
lifecycle adds its verb there. Nothing is changed.
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

RBAC = "rbac.authorization.k8s.io"
#: Verbs on every kind the modules' manifests hold, in all namespaces, and the calls that use them.
OBJECT_VERBS = {
    "get": "Observer.read: a GET for what a labelled list cannot show",
    "list": "Observer._list_kind (by our labels), the daemon's watches (list then watch)",
    "watch": "the daemon's watches of our objects (KindWatch)",
    "create": "Cluster.apply: a server-side apply of an object not there yet",
    "patch": "Cluster.apply (server-side apply, its dry run too), Writer.patch (release), enforce",
    "delete": "Writer.delete: prune, removal",
}
#: Verbs on the instances of each module's kinds (its CRDs' and ``managedResources``): they
#: block its removal (L8), in all namespaces.
INSTANCE_VERBS = {
    "list": "Observer._instances (blocking a removal), fetch_blocking_kinds",
    "watch": "the daemon's watches of every instance (KindWatch)",
}
#: Verbs on ConfigMaps of the system namespace: the inventories.
INVENTORY_VERBS = {
    "get": "Observer.read",
    "list": "Observer._list_inventories, fetch_blocking_kinds",
    "create": "Writer.write_inventory (server-side apply)",
    "patch": "Writer.write_inventory (server-side apply)",
    "delete": "Writer.delete_inventory",
}
#: Verbs on Namespaces (made for a module's objects, never labelled ours nor deleted: S1).
NAMESPACE_VERBS = {
    "get": "Writer.ensure_namespace, Observer.get_all",
    "create": "Writer.ensure_namespace (server-side apply)",
    "patch": "Writer.ensure_namespace (server-side apply)",
}
#: Verbs on CRDs whatever the modules hold: the daemon watches ours on every cluster.
CRD_VERBS = {"list": "the daemon's watch of CRDs", "watch": "the daemon's watch of CRDs"}
#: Verbs on Events, in all namespaces (``spec.kubernetesEvents``).
EVENT_VERBS = {
    "create": "KubeCluster.record_event",
    "get": "KubeCluster._count_event (the same Event again)",
    "patch": "KubeCluster._count_event",
}
#: In a Namespace a module deletes, every served kind is listed first: a user's objects there
#: keep it (Observer._namespace_users); asked as ``list`` on every resource.
OCCUPANT_VERBS = {"list": "Observer._namespace_users"}
#: RBAC objects a module ships: the server lets an identity create a role granting more than
#: it holds only with ``escalate``, and a binding to a role only with ``bind`` on it.
ROLES = {"ClusterRole": "clusterroles", "Role": "roles"}
BINDINGS = frozenset({"ClusterRoleBinding", "RoleBinding"})


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
@cluster_options()
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
    clusters: ClusterOptions,
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
    clusters.check_one_runtime(runtime_names)
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
    """The permissions a sync of runtime ``name`` and the daemon's watches need on its cluster
    (see the tables above); kinds named through ``cluster``'s discovery, else the manifests'
    CRDs, else the plural Kubernetes would guess."""
    from reconciler.cluster.api import Permission

    bodies = _desired_bodies(config, name)
    plurals = _Plurals(bodies, cluster)
    wanted: set[Permission] = set()
    for group, resource in {plurals.of_body(body) for body in bodies}:
        wanted |= {Permission(v, group, resource) for v in OBJECT_VERBS}
    for group, kind in _managed_kinds(config, name, bodies):
        group, resource = plurals.of(group, "", kind)
        wanted |= {Permission(v, group, resource) for v in INSTANCE_VERBS}
    namespace = config.settings.system_namespace
    wanted |= {Permission(v, "", "configmaps", namespace) for v in INVENTORY_VERBS}
    wanted |= {Permission(v, "", "namespaces") for v in NAMESPACE_VERBS}
    wanted |= {
        Permission(v, "apiextensions.k8s.io", "customresourcedefinitions") for v in CRD_VERBS
    }
    if config.settings.kubernetes_events:
        wanted |= {Permission(v, "", "events") for v in EVENT_VERBS}
    wanted |= _rbac_permissions(bodies)
    for owned in sorted({_name(b) for b in bodies if _is_namespace(b)}):
        wanted |= {Permission(v, "*", "*", owned) for v in OCCUPANT_VERBS}
    return sorted(wanted)


def _desired_bodies(config: ConfigRepo, name: str) -> list[dict[str, Any]]:
    from reconciler.core.render import Renderer
    from reconciler.core.resolve import resolve_runtime

    resolution = resolve_runtime(config, config.runtimes[name])
    renderer = Renderer(config)
    bodies = [dict(rendered.body) for rendered in renderer.render(resolution)]
    for resolved in resolution.modules:  # hooks are created, read and deleted as objects are
        bodies.extend(dict(hook) for hook in renderer.hooks(resolved, name))
    return bodies


def _managed_kinds(
    config: ConfigRepo, name: str, bodies: Iterable[dict[str, Any]]
) -> set[tuple[str, str]]:
    """(group, kind) whose instances block a module's removal: its CRDs' kinds and its
    ``managedResources`` (as :meth:`DesiredModule.managed_kinds`)."""
    from reconciler.core.objects import crd_kind
    from reconciler.core.resolve import resolve_runtime

    kinds = {crd_kind(b) for b in bodies if b.get("kind") == "CustomResourceDefinition"}
    for module in resolve_runtime(config, config.runtimes[name]).modules:
        found = config.modules.get(module.name)
        kinds |= {(m.group, m.kind) for m in (found.managed_resources if found else ())}
    return kinds


def _rbac_permissions(bodies: Iterable[dict[str, Any]]) -> set[Permission]:
    """``escalate`` on the kinds of the roles among ``bodies``, ``bind`` on those their
    bindings refer to (an identity holding every permission granted needs neither; asking for
    them is the simple, checkable rule)."""
    from reconciler.cluster.api import Permission

    wanted: set[Permission] = set()
    for body in bodies:
        if not str(body.get("apiVersion") or "").startswith(f"{RBAC}/"):
            continue
        kind = str(body.get("kind") or "")
        if kind in ROLES:
            wanted.add(Permission("escalate", RBAC, ROLES[kind]))
        elif kind in BINDINGS:
            referred = str((body.get("roleRef") or {}).get("kind") or "ClusterRole")
            wanted.add(Permission("bind", RBAC, ROLES.get(referred, "clusterroles")))
    return wanted


def _is_namespace(body: dict[str, Any]) -> bool:
    return body.get("apiVersion") == "v1" and body.get("kind") == "Namespace"


def _name(body: dict[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("name") or "")


class _Plurals:
    """(group, resource) of a kind: from discovery, else from a CRD among the manifests (a
    kind not served until its module is installed), else the plural Kubernetes guesses."""

    def __init__(self, bodies: Iterable[dict[str, Any]], cluster: Cluster) -> None:
        from reconciler.core.objects import crd_kind

        self.cluster = cluster
        self.crds = {
            crd_kind(body): str(((body.get("spec") or {}).get("names") or {}).get("plural") or "")
            for body in bodies
            if body.get("kind") == "CustomResourceDefinition"
        }

    def of_body(self, body: dict[str, Any]) -> tuple[str, str]:
        api_version = str(body.get("apiVersion") or "")
        return self.of(api_version.rpartition("/")[0], api_version, str(body.get("kind") or ""))

    def of(self, group: str, api_version: str, kind: str) -> tuple[str, str]:
        info = (
            self.cluster.kind_info(api_version, kind)
            if api_version
            else self.cluster.kinds_in_group(group, kind)
        )
        if info is not None:
            return info.group, info.plural
        return group, self.crds.get((group, kind)) or _guessed_plural(kind)


def _guessed_plural(kind: str) -> str:
    """The plural Kubernetes gives a kind by default (``lower + s``, ``-es``, ``-ies``)."""
    lower = kind.lower()
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return lower + "es"
    if lower.endswith("y") and lower[-2:-1] not in ("a", "e", "i", "o", "u"):
        return lower[:-1] + "ies"
    return lower + "s"
