"""``reconciler rbac``: the least-privilege grant a runtime (or the whole fleet) needs on its
managed cluster, as YAML for ``kubectl apply``: a ClusterRole and its ClusterRoleBinding, and a
Role with its RoleBinding in the system namespace (the inventories' ConfigMaps), bound to the
identity of a kubeconfig Secret (``--user``) or to a ServiceAccount (in-cluster mode).

The permissions are :func:`reconciler.cli.check.needed_permissions`, the list ``reconciler
check`` asks the server about: one source of truth. Kinds are named offline (the built-in kinds,
the CRDs among the manifests, else the plural Kubernetes would guess); nothing is read from a
cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from reconciler.cli import exits
from reconciler.cli.options import (
    RepoInput,
    channels_option,
    max_size_option,
    repo_argument,
    runtimes_option,
)
from reconciler.errors import NotFoundError

if TYPE_CHECKING:
    from reconciler.cluster.api import Permission

RBAC = "rbac.authorization.k8s.io"
#: The order verbs are written in (as ``kubectl create role`` does); others follow by name.
VERB_ORDER = ("get", "list", "watch", "create", "patch", "delete", "escalate", "bind")
LABELS = {"app.kubernetes.io/name": "reconciler", "app.kubernetes.io/component": "managed-cluster"}


@click.command(epilog=exits.RBAC.describe())
@repo_argument
@runtimes_option
@click.option(
    "--name",
    default="reconciler",
    show_default=True,
    help="Name of the ClusterRole, the Role and their bindings.",
)
@click.option(
    "--service-account",
    default="reconciler-system/reconciler",
    show_default=True,
    metavar="NAMESPACE/NAME",
    help="The ServiceAccount bound (in-cluster mode, or a kubeconfig Secret's token).",
)
@click.option(
    "--user",
    default=None,
    metavar="NAME",
    help="Bind this user instead of the ServiceAccount (a client certificate's CN).",
)
@click.option(
    "--namespace/--no-namespace",
    "with_namespace",
    default=True,
    show_default=True,
    help="Print the system Namespace the Role lives in (--no-namespace where it exists and is "
    "managed already, as deploy/ does in the daemon's own cluster).",
)
@channels_option
@max_size_option
def rbac(
    repo: Path,
    runtime_names: Sequence[str],
    name: str,
    service_account: str,
    user: str | None,
    with_namespace: bool,
    channels_dir: Path | None,
    max_file_size: int,
) -> None:
    """Print the least-privilege ClusterRole and Role (with their bindings) that the given
    runtimes (all by default) need on their cluster: every verb sync and the daemon use on
    every kind of their modules, escalate and bind where modules ship RBAC, the system
    namespace's ConfigMaps (inventories) and Events. The same list `reconciler check` asks
    the server about. Reads no cluster."""
    import yaml

    from reconciler.cli.check import needed_permissions
    from reconciler.cli.loading import load_valid_repo
    from reconciler.cluster.memory import InMemoryCluster

    config = load_valid_repo(RepoInput(repo, channels_dir, max_file_size))
    unknown = [n for n in runtime_names if n not in config.runtimes]
    if unknown:
        raise NotFoundError(f"runtime '{unknown[0]}' does not exist in {repo}")
    names = list(runtime_names) or sorted(config.runtimes)
    discovery = InMemoryCluster()  # the built-in kinds only: nothing is read from a cluster
    permissions = {p for n in names for p in needed_permissions(config, n, discovery)}
    subject = subject_of(service_account, user)
    documents = role_documents(permissions, name, subject, config.settings.system_namespace)
    if not with_namespace:
        documents = [d for d in documents if d["kind"] != "Namespace"]
    click.echo(f"# reconciler rbac: what runtime(s) {', '.join(names)} need on their cluster")
    click.echo(yaml.safe_dump_all(documents, sort_keys=False), nl=False)


def subject_of(service_account: str, user: str | None) -> dict[str, str]:
    """The RBAC subject bound: ``user``, else the ServiceAccount ``NAMESPACE/NAME``."""
    if user:
        return {"kind": "User", "apiGroup": RBAC, "name": user}
    namespace, _, name = service_account.partition("/")
    if not namespace or not name:
        raise click.BadParameter(
            f"{service_account!r}: expected NAMESPACE/NAME", param_hint="--service-account"
        )
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


def role_documents(
    permissions: Iterable[Permission],
    name: str,
    subject: Mapping[str, str],
    system_namespace: str,
) -> list[dict[str, Any]]:
    """The ClusterRole of the permissions in all namespaces, the Role of those in the system
    namespace (with the Namespace, so it applies before a first sync), and their bindings. A
    permission in another namespace (a module's own Namespace, made by its first sync) is
    granted in all: a Role cannot be applied before its Namespace exists."""
    cluster_wide = [p for p in permissions if p.namespace != system_namespace]
    in_system = [p for p in permissions if p.namespace == system_namespace]
    metadata = {"name": name, "labels": dict(LABELS)}
    in_namespace = {"name": name, "namespace": system_namespace, "labels": dict(LABELS)}
    documents: list[dict[str, Any]] = [
        {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": metadata,
         "rules": rules_of(cluster_wide)},
        _binding("ClusterRoleBinding", "ClusterRole", name, subject, None),
    ]  # fmt: skip
    if in_system:
        documents += [
            {"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": system_namespace, "labels": dict(LABELS)}},
            {"apiVersion": f"{RBAC}/v1", "kind": "Role",
             "metadata": in_namespace,
             "rules": rules_of(in_system)},
            _binding("RoleBinding", "Role", name, subject, system_namespace),
        ]  # fmt: skip
    return documents


def rules_of(permissions: Iterable[Permission]) -> list[dict[str, list[str]]]:
    """RBAC rules granting ``permissions`` (namespaces aside): one rule per API group and set
    of verbs, listing its resources."""
    verbs: dict[tuple[str, str], set[str]] = {}
    for permission in permissions:
        verbs.setdefault((permission.group, permission.resource), set()).add(permission.verb)
    rules: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for (group, resource), granted in sorted(verbs.items()):
        rules.setdefault((group, _ordered(granted)), []).append(resource)
    return [
        {"apiGroups": [group], "resources": resources, "verbs": list(ordered)}
        for (group, ordered), resources in sorted(rules.items())
    ]


def _ordered(verbs: set[str]) -> tuple[str, ...]:
    known = [v for v in VERB_ORDER if v in verbs]
    return (*known, *sorted(verbs - set(VERB_ORDER)))


def _binding(
    kind: str, role_kind: str, name: str, subject: Mapping[str, str], namespace: str | None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    metadata["labels"] = dict(LABELS)
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": kind,
        "metadata": metadata,
        "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": name},
        "subjects": [dict(subject)],
    }
