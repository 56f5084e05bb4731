"""Typed model values from documents that passed their schema (pure).

Validation (:mod:`reconciler.config.validate`) checks each document, then builds the
:class:`~reconciler.core.model.ConfigRepo` from the valid ones with these functions: settings
with durations as :class:`~datetime.timedelta`, modules with their version folders, runtimes with
their cluster access, module entries and maintenance window. They trust the schema (every
required field present, every type right) and add no check of their own.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

from reconciler.core.durations import duration_minutes, parse_duration
from reconciler.core.endpoints import (
    Endpoint,
    EndpointType,
    NotificationSettings,
    SecretRef,
)
from reconciler.core.model import (
    ChannelsFrom,
    ClientRate,
    ClusterAccess,
    HealthCheck,
    HookPolicy,
    MaintenanceWindow,
    ManagedKind,
    Module,
    ModuleRef,
    ModuleVersion,
    RetryLimits,
    RolloutPolicy,
    Runtime,
    Settings,
    Strategy,
    WavePolicy,
)


def settings_from(spec: Mapping[str, Any]) -> Settings:
    """Typed settings from a valid Settings ``spec``: durations as :class:`timedelta`."""
    brake = spec.get("deletionBrake", {})
    intervals = spec.get("intervals", {})
    operations = spec.get("operations", {})
    kube_client = spec.get("kubeClient", {})
    defaults = Settings()
    return Settings(
        system_namespace=spec.get("systemNamespace", defaults.system_namespace),
        channels_from=ChannelsFrom.of(spec.get("channelsFrom")),
        max_deletions_per_sync=brake.get("maxDeletionsPerSync", defaults.max_deletions_per_sync),
        allow_deletions=brake.get("allow", defaults.allow_deletions),
        poll_interval=_duration(intervals.get("poll"), defaults.poll_interval),
        resync_interval=_duration(intervals.get("resync"), defaults.resync_interval),
        watch=bool(spec.get("watch", defaults.watch)),
        debounce=_duration(intervals.get("debounce"), defaults.debounce),
        disabled_steps=tuple(operations.get("disabledSteps", ())),
        operation_timeouts={
            kind: _duration(text, timedelta(0))
            for kind, text in operations.get("timeouts", {}).items()
        },
        retry_limits=_retry_limits(operations.get("retryWithoutFail", {})),
        kubernetes_events=bool(spec.get("kubernetesEvents", defaults.kubernetes_events)),
        client_rate=ClientRate(
            float(kube_client.get("qps", defaults.client_rate.qps)),
            int(kube_client.get("burst", defaults.client_rate.burst)),
        ),
        notifications=notifications_from(spec.get("notifications", {})),
        rollout=_rollout(spec.get("rollout")),
    )


def _rollout(spec: Mapping[str, Any] | None) -> RolloutPolicy | None:
    if spec is None:
        return None
    waves = tuple(
        WavePolicy(w["name"], selector=w.get("selector"), percent=w.get("percent"))
        for w in spec["waves"]
    )
    return RolloutPolicy(
        waves,
        healthy_for=_duration(spec.get("healthyFor"), timedelta(minutes=10)),
        max_errors=int(spec.get("haltAfterErrors", 1)),
    )


def notifications_from(spec: Mapping[str, Any]) -> NotificationSettings:
    """Typed ``spec.notifications`` of valid Settings."""
    defaults = NotificationSettings()
    return NotificationSettings(
        endpoints=tuple(_endpoint(e) for e in spec.get("endpoints", ())),
        attempts=int(spec.get("attempts", defaults.attempts)),
        kubernetes_events=bool(spec.get("kubernetesEvents", defaults.kubernetes_events)),
    )


def _endpoint(data: Mapping[str, Any]) -> Endpoint:
    return Endpoint(
        name=data["name"],
        type=EndpointType(data["type"]),
        url=data.get("url", ""),
        url_from=_secret_ref(data.get("urlFrom")),
        token_from=_secret_ref(data.get("tokenFrom")),
        repository=str(data.get("repository", "")),
        context=data.get("context", "reconciler"),
        target_url=data.get("targetUrl", ""),
        status_on=data.get("statusOn", "config"),
        events=tuple(data.get("events", ())),
    )


def _secret_ref(data: Mapping[str, Any] | None) -> SecretRef | None:
    if data is None:
        return None
    if "file" in data:
        return SecretRef(file=data["file"])
    secret = data["secret"]
    return SecretRef(secret=secret["name"], key=secret["key"])


def _retry_limits(spec: Mapping[str, Any]) -> RetryLimits:
    default = spec.get("default")
    return RetryLimits(
        default=_duration(default, timedelta(0)) if default is not None else None,
        steps={name: _duration(text, timedelta(0)) for name, text in spec.get("steps", {}).items()},
    )


def _duration(text: str | None, default: timedelta) -> timedelta:
    return default if text is None else timedelta(seconds=parse_duration(text))


def module_from(
    data: Mapping[str, Any], versions: Mapping[str, ModuleVersion], source: str
) -> Module:
    """A typed module from a valid Module document and its version folders."""
    spec = data["spec"]
    metadata = spec.get("versions", {})
    with_metadata = {
        name: _with_metadata(v, metadata.get(name, {})) for name, v in versions.items()
    }
    return Module(
        name=data["metadata"]["name"],
        namespace=spec["namespace"],
        operator_kind=spec["operator"]["kind"],
        operator_name=spec["operator"]["name"],
        versions=with_metadata,
        depends_on=tuple(spec.get("dependsOn", ())),
        mandatory=bool(spec.get("mandatory", False)),
        managed_resources=tuple(
            ManagedKind(m["group"], m["kind"]) for m in spec.get("managedResources", ())
        ),
        description=spec.get("description", ""),
        source=source,
        hooks=HookPolicy(spec.get("hooks", HookPolicy.RUN)),
        recreate_on_immutable=bool(spec.get("recreateOnImmutable", False)),
    )


def health_checks_from(declared: Iterable[Mapping[str, Any]]) -> tuple[HealthCheck, ...]:
    """Typed ``healthChecks`` of a version from their valid entries."""
    return tuple(
        HealthCheck(c["kind"], c["name"], c.get("namespace"), c.get("group")) for c in declared
    )


def _with_metadata(version: ModuleVersion, metadata: Mapping[str, Any]) -> ModuleVersion:
    """A version with what ``spec.versions.<version>`` says of it."""
    checks = health_checks_from(metadata.get("healthChecks", ()))
    if not metadata.get("requiresDowntime", False) and not checks:
        return version
    return replace(
        version,
        requires_downtime=bool(metadata.get("requiresDowntime", False)),
        health_checks=checks,
    )


def runtime_from(data: Mapping[str, Any], source: str) -> Runtime:
    """A typed runtime from a valid Runtime document."""
    spec = data["spec"]
    window = spec.get("maintenanceWindow")
    return Runtime(
        name=data["metadata"]["name"],
        channel=spec["channel"],
        cluster=_cluster(spec["cluster"]),
        modules=tuple(_module_ref(m) for m in spec.get("modules", ())),
        labels=dict(data["metadata"].get("labels", {})),
        maintenance_window=_window(window) if window is not None else None,
        suspend=bool(spec.get("suspend", False)),
        source=source,
    )


def _cluster(cluster: Mapping[str, Any]) -> ClusterAccess:
    secret = cluster.get("kubeconfigSecret")
    return ClusterAccess(
        kubeconfig_secret=secret["name"] if secret else None,
        kubeconfig_secret_key=secret.get("key", "config") if secret else "config",
        kubeconfig_file=cluster.get("kubeconfigFile"),
        context=cluster.get("context"),
        in_cluster=bool(cluster.get("inCluster", False)),
    )


def _module_ref(entry: Mapping[str, Any]) -> ModuleRef:
    if "config" not in entry and "values" not in entry and "valuesFrom" not in entry:
        return _plain_ref(
            entry["name"], entry.get("channel"), entry.get("version"), entry.get("strategy")
        )
    return ModuleRef(
        name=entry["name"],
        channel=entry.get("channel"),
        version=entry.get("version"),
        strategy=Strategy(entry.get("strategy", Strategy.CREATE_AND_DELETE.value)),
        config=entry.get("config"),
        values=entry.get("values"),
        values_from=entry.get("valuesFrom"),
    )


@functools.lru_cache(maxsize=1 << 14)
def _plain_ref(
    name: str, channel: str | None, version: str | None, strategy: str | None
) -> ModuleRef:
    """An entry without configuration or values: one object for each (a frozen value, shared
    by the runtimes that list the same entry)."""
    chosen = Strategy(strategy) if strategy is not None else Strategy.CREATE_AND_DELETE
    return ModuleRef(name=name, channel=channel, version=version, strategy=chosen)


def _window(window: Mapping[str, Any]) -> MaintenanceWindow:
    return MaintenanceWindow(
        days=tuple(window["days"]),
        start=window["start"],
        duration_minutes=duration_minutes(window["duration"]),
        timezone=window.get("timezone", "UTC"),
    )
