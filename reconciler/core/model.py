"""The config repo as typed, frozen values (pure).

Built by the validator from documents that passed their schema; read by the resolver, the renderer
and everything after them. Field names follow the YAML (camelCase there, snake_case here). Nothing
here does I/O or knows about files beyond the source path kept for messages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any

from reconciler.core.endpoints import NotificationSettings

#: The version of the documents commands print (``-o json|yaml``, ``/status``):
#: schemas/output/output.schema.json, docs/json-output.md.
OUTPUT_API_VERSION = "reconciler.dev/v1"
DEFAULT_SYSTEM_NAMESPACE = "reconciler-system"

#: A runtime's name: a DNS-1123 label (what the Runtime schema asks of ``metadata.name``).
_RUNTIME_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def is_runtime_name(text: str) -> bool:
    """Whether ``text`` can name a runtime (a DNS-1123 label)."""
    return _RUNTIME_NAME.fullmatch(text) is not None


#: Labels and annotations put on every object we apply (DESIGN.md §3).
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "reconciler"
#: The field manager of every server-side apply we make (its fields are ours to remove).
FIELD_MANAGER = "reconciler"
LABEL_RUNTIME = "reconciler.dev/runtime"
LABEL_MODULE = "reconciler.dev/module"
ANNOTATION_MODULE_VERSION = "reconciler.dev/module-version"
ANNOTATION_DEFAULT_CONFIGURATION = "reconciler.dev/default-configuration"
#: The label an operator workload carries with its running version.
LABEL_APP_VERSION = "app.kubernetes.io/version"
#: Marks of an object that is never deleted when a version drops it or its module is removed:
#: it is released instead (our marks dropped, out of the inventory) and reported ``kept``. Ours
#: (as Flux's ``kustomize.toolkit.fluxcd.io/prune: disabled``), and Helm's, honoured on every
#: module's objects (``helm uninstall`` leaves such an object too).
KEEP_MARKS = (("reconciler.dev/prune", "disabled"), ("helm.sh/resource-policy", "keep"))


def keep_mark(body: Mapping[str, Any] | None) -> str | None:
    """``annotation: value`` of the :data:`KEEP_MARKS` that ``body`` carries, if any."""
    annotations = ((body or {}).get("metadata") or {}).get("annotations") or {}
    return next((f"{k}: {v}" for k, v in KEEP_MARKS if annotations.get(k) == v), None)


#: kubectl's client-side limits per API server (k8s.io/kubectl, since v1.27).
DEFAULT_QPS = 50.0
DEFAULT_BURST = 300


@dataclass(frozen=True, slots=True)
class ClientRate:
    """Requests per second to one API server, and how many may go at once after a pause
    (``spec.kubeClient`` of the settings; ``--kube-qps``/``--kube-burst`` override it)."""

    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST

    def __post_init__(self) -> None:
        if self.qps <= 0 or self.burst < 1:
            raise ValueError("a client rate needs qps above 0 and a burst of at least 1")


#: O4: the time limit of each kind of operation unless ``spec.operations.timeouts`` sets one.
DEFAULT_OPERATION_TIMEOUTS: Mapping[str, timedelta] = {
    "provision": timedelta(hours=24),
    "update": timedelta(hours=3),
    "deprovision": timedelta(hours=24),
}


@dataclass(frozen=True, slots=True)
class RetryLimits:
    """``spec.operations.retryWithoutFail`` (O5): how long a "retry without fail" step may keep
    asking to retry before it is skipped; ``None`` and names left out: the engine's own."""

    #: ``default``: the limit of such steps without one of their own.
    default: timedelta | None = None
    #: ``steps``: step name -> its limit.
    steps: Mapping[str, timedelta] = field(default_factory=dict)


class Strategy(StrEnum):
    """What happens to a module's objects when it leaves a runtime (L7, L8)."""

    CREATE_AND_DELETE = "CreateAndDelete"
    IGNORE = "Ignore"


@dataclass(frozen=True, slots=True)
class ClusterAccess:
    """How to reach a runtime's cluster: exactly one of the fields is set."""

    kubeconfig_secret: str | None = None
    kubeconfig_secret_key: str = "config"  # noqa: S105 (a key name, not a secret)
    kubeconfig_file: str | None = None
    context: str | None = None
    in_cluster: bool = False

    def describe(self) -> str:
        """A short human description that never contains a credential."""
        if self.kubeconfig_secret is not None:
            return f"secret {self.kubeconfig_secret}[{self.kubeconfig_secret_key}]"
        if self.kubeconfig_file is not None:
            return f"kubeconfig file {self.kubeconfig_file}"
        if self.context is not None:
            return f"context {self.context}"
        return "in-cluster"


@dataclass(frozen=True, slots=True)
class ModuleRef:
    """One entry of a runtime's ``spec.modules``."""

    name: str
    channel: str | None = None
    version: str | None = None
    strategy: Strategy = Strategy.CREATE_AND_DELETE
    #: ``config``: a partial ``spec`` of the module's configuration CR, enforced on this
    #: runtime (over the channel's ``config`` of the module; docs/configuration.md).
    config: Mapping[str, Any] | None = None
    #: ``values`` merged over ``valuesFrom`` (a file of the repo): the runtime's values of a
    #: chart module, the strongest layer (docs/charts.md).
    values: Mapping[str, Any] | None = None
    #: ``valuesFrom``: the repo path of the values file, for messages and causes.
    values_from: str | None = None
    #: The ``valuesFrom`` file's values (already under ``values``), to tell the two apart in
    #: causes of a fleet diff.
    file_values: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class MaintenanceWindow:
    """Weekly window in which upgrades that need downtime may run (L10)."""

    days: tuple[str, ...]
    start: str
    duration_minutes: int
    timezone: str = "UTC"


@dataclass(frozen=True, slots=True)
class Runtime:
    """A cluster of the fleet and the modules it should run."""

    name: str
    channel: str
    cluster: ClusterAccess
    modules: tuple[ModuleRef, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    maintenance_window: MaintenanceWindow | None = None
    suspend: bool = False
    source: str = ""


@dataclass(frozen=True, slots=True)
class ManagedKind:
    """A kind whose instances block a module's deletion."""

    group: str
    kind: str


class ModuleKind(StrEnum):
    """What a module version folder holds, decided by the file it has (docs/charts.md):
    ``manifest.yaml`` (manifest), ``chart/Chart.yaml`` (chart), ``kustomization.yaml``
    (kustomize) or ``source.yaml`` (source: a chart or bundle fetched by digest)."""

    MANIFEST = "manifest"
    CHART = "chart"
    KUSTOMIZE = "kustomize"
    SOURCE = "source"

    @property
    def templated(self) -> bool:
        """Whether the objects are rendered after resolution (all kinds but ``manifest``)."""
        return self is not ModuleKind.MANIFEST


@dataclass(frozen=True, slots=True)
class TemplateSource:
    """What a renderer needs of a templated version besides the values: its files.

    ``files`` maps paths relative to the template's root (``Chart.yaml``, ``templates/x.yaml``)
    to their bytes; ``digest`` names that content (sha256 of paths and bytes), the first part
    of the render cache's key. ``values`` is the version's ``values.yaml`` (over the chart's
    own defaults), read from ``values_path``. ``name`` names the chart (its ``Chart.yaml``).
    ``defaults`` are the chart's own ``values.yaml`` as read (the engine applies them; kept
    to name a changed default in a fleet diff's causes).
    """

    kind: ModuleKind
    digest: str
    files: Mapping[str, bytes]
    root: str
    values: Mapping[str, Any] = field(default_factory=dict)
    values_path: str = ""
    name: str = ""
    defaults: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HealthCheck:
    """``spec.versions.<version>.healthChecks[]``: an object of the version (its manifest or
    its default configuration) whose health counts toward the module's readiness, as Flux's
    ``healthChecks``; ``namespace`` and ``group`` narrow the match when given."""

    kind: str
    name: str
    namespace: str | None = None
    group: str | None = None

    @property
    def subject(self) -> str:
        """``Job/ns/name`` (``Job/name`` without a namespace), as the check names it."""
        return "/".join(p for p in (self.kind, self.namespace, self.name) if p)


@dataclass(frozen=True, slots=True)
class ModuleVersion:
    """One version folder of a module: its manifest objects and default configuration, or
    the template (a chart, an overlay, a fetched source) its objects are rendered from."""

    version: str
    objects: tuple[Mapping[str, Any], ...]
    default_configuration: Mapping[str, Any] | None = None
    requires_downtime: bool = False
    kind: ModuleKind = ModuleKind.MANIFEST
    template: TemplateSource | None = None
    #: ``healthChecks``: objects whose health counts toward readiness besides the operator.
    health_checks: tuple[HealthCheck, ...] = ()


class HookPolicy(StrEnum):
    """What a chart's Helm hooks get (``spec.hooks``; docs/charts.md, Hooks)."""

    RUN = "Run"  # run in their phases, as Helm runs them (the default)
    REFUSE = "Refuse"  # validate refuses a chart that renders hooks (C9)
    SKIP = "Skip"  # stated skipped: neither run nor applied, listed by render


@dataclass(frozen=True, slots=True)
class Module:
    """An installable unit with its versions."""

    name: str
    namespace: str
    operator_kind: str
    operator_name: str
    versions: Mapping[str, ModuleVersion]
    depends_on: tuple[str, ...] = ()
    mandatory: bool = False
    managed_resources: tuple[ManagedKind, ...] = ()
    description: str = ""
    source: str = ""
    hooks: HookPolicy = HookPolicy.RUN
    #: ``spec.recreateOnImmutable``: every object (but the kinds never recreated) is replaced
    #: when the server refuses its change as immutable (:mod:`reconciler.core.preflight`).
    recreate_on_immutable: bool = False


@dataclass(frozen=True, slots=True)
class Channel:
    """A release ring: module name -> version."""

    name: str
    modules: Mapping[str, str]
    source: str = ""
    #: ``spec.config``: module name -> a partial ``spec`` of its configuration CR, enforced on
    #: every runtime that takes the module with this channel (a runtime's ``config`` wins).
    config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: ``spec.values``: module name -> values of its chart on every runtime of this channel
    #: (over the version's ``values.yaml``; a runtime's ``values`` win).
    values: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChannelsFrom:
    """``channelsFrom``: channels read from a folder (``path``) or a git repository (``git`` at
    ``ref``, in its folder ``sub_path``) instead of the config repo's ``channels/``."""

    path: str | None = None
    git: str | None = None
    ref: str = "main"
    sub_path: str = "channels"

    @classmethod
    def of(cls, data: object) -> ChannelsFrom | None:
        """The typed value of a ``channelsFrom`` mapping, read leniently (the loader reads it
        before validation): ``None`` unless it names a string ``git`` or ``path``."""
        if not isinstance(data, Mapping):
            return None
        git, path = data.get("git"), data.get("path")
        if isinstance(git, str):
            ref = data.get("ref", "main")  # not a string: "", which no ref check passes
            sub_path = str(data.get("subPath", "channels"))
            return cls(git=git, ref=ref if isinstance(ref, str) else "", sub_path=sub_path)
        return cls(path=path) if isinstance(path, str) else None


@dataclass(frozen=True, slots=True)
class WavePolicy:
    """One wave of ``spec.rollout``: ``selector`` (a kubectl label selector), ``percent`` of the
    runtimes a commit changes, or neither: every runtime left."""

    name: str
    selector: str | None = None
    percent: int | None = None

    @property
    def describe(self) -> str:
        """``tier=dev``, ``10%`` or ``the rest``."""
        if self.selector is not None:
            return self.selector
        return f"{self.percent}%" if self.percent is not None else "the rest"


@dataclass(frozen=True, slots=True)
class RolloutPolicy:
    """``spec.rollout`` of the Settings."""

    waves: tuple[WavePolicy, ...]
    #: How long every runtime of a wave stays Ready before the next wave starts.
    healthy_for: timedelta = timedelta(minutes=10)
    #: Runtimes in Error (on the rollout's commit) that halt the rollout.
    max_errors: int = 1


@dataclass(frozen=True, slots=True)
class Settings:
    """Fleet-wide settings from ``reconciler.yaml`` (all optional), read once by the validator
    into these values and used as they are by every command and the daemon."""

    system_namespace: str = DEFAULT_SYSTEM_NAMESPACE
    channels_from: ChannelsFrom | None = None
    max_deletions_per_sync: int = 5
    allow_deletions: bool = False
    #: ``spec.intervals``: the daemon's defaults (its flags override them).
    poll_interval: timedelta = timedelta(seconds=60)
    resync_interval: timedelta = timedelta(minutes=10)
    #: ``spec.watch`` and ``spec.intervals.debounce``: event-driven reconciliation.
    watch: bool = True
    debounce: timedelta = timedelta(seconds=2)
    disabled_steps: tuple[str, ...] = ()
    #: ``spec.operations.timeouts``: operation type (provision, update, deprovision) -> limit.
    operation_timeouts: Mapping[str, timedelta] = field(default_factory=dict)
    #: ``spec.operations.retryWithoutFail``: when a step that retries without fail is skipped.
    retry_limits: RetryLimits = field(default_factory=RetryLimits)
    #: ``spec.kubeClient``: client-side rate limits per API server.
    client_rate: ClientRate = field(default_factory=ClientRate)
    #: ``spec.kubernetesEvents``: an Event on each object changed or blocking a removal.
    kubernetes_events: bool = True
    #: ``spec.notifications``: who is told about rollouts and refused or held commits.
    notifications: NotificationSettings = field(default_factory=NotificationSettings)
    #: ``spec.rollout``: a changing commit reaches the fleet in waves (core.rollouts); None:
    #: at once.
    rollout: RolloutPolicy | None = None


@dataclass(frozen=True, slots=True, weakref_slot=True)  # remembered by resolve.RESOLUTIONS
class ConfigRepo:
    """A whole, valid config repo."""

    settings: Settings
    runtimes: Mapping[str, Runtime]
    modules: Mapping[str, Module]
    channels: Mapping[str, Channel]
    #: The objects of templated module versions, rendered per (runtime, module) after
    #: resolution (core.templates); empty when the repo has none or was not rendered.
    rendered: Mapping[tuple[str, str], RenderedTemplate] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RenderedTemplate:
    """What rendering a templated version with one runtime's values gave: the objects to
    apply, the hook objects kept apart (docs/charts.md), the chart's notes (text, not YAML),
    and the key it is cached under (equal keys, equal output)."""

    objects: tuple[Mapping[str, Any], ...]
    key: str
    hooks: tuple[Mapping[str, Any], ...] = ()
    notes: str = ""
