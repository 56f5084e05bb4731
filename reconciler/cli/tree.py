"""``reconciler tree RUNTIME``: what each module manages in the runtime's cluster, as its
inventory records it, with each object's live state (as ``flux tree``).

Reads only: the inventories (one list), then one list per kind of the objects they name (a GET
for an object a list cannot show). The runtime is reached as ``diff`` reaches it: through its
``spec.cluster`` in the config repo, or, for a runtime that left git, as the state store
recorded its last operation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from reconciler.cli import exits
from reconciler.cli.options import (
    ClusterOptions,
    RepoInput,
    channels_option,
    cluster_options,
    complete_runtime,
    max_size_option,
    repo_argument,
    state_option,
)
from reconciler.cli.output import echo_document, is_document, output_option
from reconciler.errors import NotFoundError

if TYPE_CHECKING:
    from reconciler.core.inventory import Inventory
    from reconciler.core.objects import Body, ObjectRef

Branches = list[tuple["Inventory", dict["ObjectRef", "Body | None"]]]


@click.command(epilog=exits.TREE.describe())
@click.argument("runtime", shell_complete=complete_runtime)
@repo_argument
@click.option("--module", "modules", multiple=True, help="Only this module (repeat for several).")
@cluster_options()
@state_option
@channels_option
@max_size_option
@output_option("text", "json", "yaml")
@click.pass_context
def tree(
    ctx: click.Context,
    runtime: str,
    repo: Path,
    modules: Sequence[str],
    clusters: ClusterOptions,
    state_url: str,
    channels_dir: Path | None,
    max_file_size: int,
    output_format: str,
) -> None:
    """The objects each module of RUNTIME manages, as its inventory in the cluster records
    them, with their live state: Established or NotEstablished (CRDs), Available or Progressing
    (workloads), Present, Missing, Terminating. REPO (default: the current directory) says how
    to reach the cluster."""
    from reconciler.cli.clusters import Access, state_url_for
    from reconciler.cli.loading import load_valid_repo
    from reconciler.lifecycle.executor import Lifecycle

    config = load_valid_repo(RepoInput(repo, channels_dir, max_file_size))
    access = Access(clusters, config.settings)
    if runtime in config.runtimes:
        cluster = access.connect(config.runtimes[runtime].cluster, runtime)
    else:
        recorded = _recorded(
            state_url_for(ctx, state_url, clusters.snapshot), runtime, config.runtimes
        )
        cluster = access.connect(recorded, runtime)
    lifecycle = Lifecycle(cluster, system_namespace=config.settings.system_namespace)
    branches = [
        b for b in lifecycle.inventory_tree(runtime) if not modules or b[0].module in modules
    ]
    unknown = sorted(set(modules) - {inventory.module for inventory, _ in branches})
    if unknown:
        raise NotFoundError(f"runtime {runtime}: no module {unknown[0]} recorded in its cluster")
    where = cluster.identity.describe()
    if is_document(output_format):
        echo_document("ObjectTree", tree_json(runtime, where, branches), output_format)
        return
    click.echo(tree_text(runtime, where, branches), nl=False)


def _recorded(state_url: str, runtime: str, in_git: Iterable[str]) -> Any:
    """How the store last reached ``runtime``, which left git; refused (did you mean) when the
    store does not know it either."""
    from reconciler.cli.names import check_runtime
    from reconciler.operations.runner import recorded_access
    from reconciler.operations.store import open_existing_store

    store = open_existing_store(state_url)
    known = set(in_git) | set(store.runtime_names() if store is not None else ())
    check_runtime(runtime, known, "the config repo nor in the state store")
    assert store is not None  # it knows the runtime
    return recorded_access(store, runtime)


def tree_text(runtime: str, where: str, branches: Branches) -> str:
    """The tree as text: the runtime, its modules, their objects with their live state."""
    from reconciler.core.live import live_state

    lines = [f"runtime {runtime}" + (f" ({where})" if where else "")]
    if not branches:
        lines.append("└── no module recorded in its cluster")
    for index, (inventory, objects) in enumerate(branches):
        last_module = index == len(branches) - 1
        lines.append(
            f"{'└' if last_module else '├'}── {inventory.module} {inventory.version} "
            f"({inventory.strategy}{_not_ready(inventory)})"
        )
        indent = "    " if last_module else "│   "
        width = max((len(ref.subject) for ref in objects), default=0)
        for position, (ref, body) in enumerate(objects.items()):
            tip = "└" if position == len(objects) - 1 else "├"
            note = "  (default configuration)" if ref == inventory.default_configuration else ""
            lines.append(f"{indent}{tip}── {ref.subject:<{width}}  {live_state(body)}{note}")
    return "\n".join(lines) + "\n"


def _not_ready(inventory: Inventory) -> str:
    """``; not Ready yet, 1.0.0 runs`` for a module whose version has not become Ready (L15)."""
    from reconciler.core.inventory import NEVER_READY

    if not inventory.upgrading:
        return ""
    if inventory.ready_version == NEVER_READY:
        return "; not Ready yet"
    return f"; not Ready yet, {inventory.ready_version} runs"


def tree_json(runtime: str, where: str, branches: Branches) -> dict[str, Any]:
    """The body of an ``ObjectTree`` document (docs/json-output.md)."""
    from reconciler.core.live import live_state

    return {
        "runtime": runtime,
        "cluster": where,
        "modules": [
            {
                "module": inventory.module,
                "version": inventory.version,
                "readyVersion": inventory.ready_version,
                "strategy": str(inventory.strategy),
                "commit": inventory.commit,
                "objects": [
                    {
                        "subject": ref.subject,
                        "apiVersion": ref.api_version,
                        "state": live_state(body),
                        "defaultConfiguration": ref == inventory.default_configuration,
                    }
                    for ref, body in objects.items()
                ],
            }
            for inventory, objects in branches
        ],
    }
