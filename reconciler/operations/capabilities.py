"""A runtime's charts rendered for the cluster they go to (``.Capabilities``), at each sync.

The repo is rendered when it is read, with each runtime's capabilities as the state store last
recorded them (else the engine's defaults; ``reconciler.core.templates``). A sync of a runtime
that gets a chart reads its cluster's version and served API versions first
(:func:`fetch_capabilities`), records them when they changed, and renders that runtime's charts
again when they differ from what the repo was rendered with, so a chart's ``kubeVersion`` and its
``.Capabilities`` branches are judged by the cluster itself, on a first sync and after a cluster
upgrade too. Callers: the operations runner (``reconciler sync``, the daemon).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from reconciler.cluster.api import Cluster, Reviewer
from reconciler.core.model import ConfigRepo
from reconciler.core.resolve import RESOLUTIONS
from reconciler.core.templates import (
    DEFAULT_KUBE_VERSION,
    ENGINE_DEFAULT,
    Capabilities,
    RenderCache,
    TemplateRenderer,
    render_runtime,
)
from reconciler.errors import RenderError


def fetch_capabilities(cluster: Cluster, now: datetime) -> Capabilities:
    """What ``cluster`` serves, as Helm lists it for ``.Capabilities.APIVersions``: each
    ``group/version`` and each ``group/version/Kind``; its version from discovery."""
    kinds = cluster.served_kinds(fresh=True)  # first: the version is read with discovery
    versions = {k.api_version for k in kinds} | {f"{k.api_version}/{k.kind}" for k in kinds}
    told = cluster.server_version() if isinstance(cluster, Reviewer) else DEFAULT_KUBE_VERSION
    return Capabilities(told, tuple(sorted(versions)), now)


@dataclass(slots=True)
class ChartRendering:
    """How a sync renders charts again: the engine, a cache shared with the read of the repo
    (an unchanged cluster renders nothing twice), and the capabilities the repo was rendered
    with, by runtime."""

    renderer: TemplateRenderer
    cache: RenderCache = field(default_factory=RenderCache)
    rendered_with: Mapping[str, Capabilities] = field(default_factory=dict)

    def for_cluster(self, repo: ConfigRepo, runtime: str, seen: Capabilities) -> ConfigRepo:
        """``repo`` with ``runtime``'s templated modules rendered for a cluster of ``seen``
        (``repo`` itself when it was rendered so); :class:`RenderError` when one does not
        render there (a ``kubeVersion`` the cluster does not meet)."""
        if seen.same_as(self.rendered_with.get(runtime, ENGINE_DEFAULT)):
            return repo
        rendered, failures = render_runtime(
            repo, repo.runtimes[runtime], self.renderer, self.cache, seen
        )
        if failures:
            failure = failures[0]
            raise RenderError(
                f"module {failure.module} {failure.version} does not render for runtime "
                f"{runtime}'s cluster (Kubernetes {seen.kube_version}): {failure.message}",
                failure.path,
            )
        fresh = {**repo.rendered, **{(runtime, name): t for name, t in rendered.items()}}
        again = replace(repo, rendered=fresh)
        RESOLUTIONS.share(repo, again)  # the same modules and channels: the same answers
        return again
