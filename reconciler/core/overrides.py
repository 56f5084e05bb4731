"""Configuration overrides: the fields of a module's configuration CR the fleet enforces (pure).

A module's default configuration (``default.yaml``) is created once and is the user's after
that (L3). On top of it, a channel's ``spec.config.<module>`` (fleet-wide) and a runtime's
``spec.modules[].config`` (one cluster) name fields that *win*: each a partial ``spec`` of the
configuration CR. They merge like a JSON merge patch (RFC 7386): mappings merge key by key, the
runtime's value wins over the channel's on the same field, lists and scalars are replaced whole,
and a runtime's ``null`` releases a field the channel sets (it is then not enforced on that
runtime). The channel whose ``config`` applies is the module's channel on that runtime (the
module entry's ``channel``, else the runtime's), also when the version is pinned.

The result, a :class:`ConfigOverride`, carries the merged partial spec and, per enforced field,
where it came from: what ``render`` shows, what a later enforcement applies with a field
manager of its own, and what a fleet diff of overrides compares (docs/configuration.md).
Callers: the renderer, the validator (C8) and the CLI ``render``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.core.model import Runtime
from reconciler.core.resolve import ResolvedModule

#: A field of the configuration CR's ``spec``, as its keys from ``spec`` down.
FieldPath = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class EnforcedField:
    """One enforced field (a scalar, a list or an empty mapping) and who enforces it:
    ``channel <name>`` or ``runtime <name>``."""

    path: FieldPath
    source: str

    @property
    def dotted(self) -> str:
        """``spec.a.b``, as ``render`` prints it."""
        return ".".join(("spec", *self.path))


@dataclass(frozen=True, slots=True)
class ConfigOverride:
    """The enforced part of one module's configuration CR on one runtime."""

    module: str
    version: str
    #: The merged partial ``spec`` (no ``null`` left in it).
    spec: Mapping[str, Any]
    #: Every enforced field, sorted by path.
    fields: tuple[EnforcedField, ...]


def merge_config(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` merged onto ``base`` as a JSON merge patch: mappings key by key, ``top`` wins,
    lists and scalars replaced whole, a ``null`` in ``top`` removes the field."""
    merged = {key: copy.deepcopy(value) for key, value in base.items()}
    for key, value in top.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_config(merged[key], value)
        else:
            merged[key] = _without_nulls(value)
    return merged


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return copy.deepcopy(value)


def module_channel(runtime: Runtime, module: str) -> str:
    """The channel whose ``config`` of ``module`` applies on ``runtime``."""
    ref = next((m for m in runtime.modules if m.name == module), None)
    return ref.channel if ref is not None and ref.channel else runtime.channel


def runtime_config(runtime: Runtime, module: str) -> Mapping[str, Any] | None:
    """The ``config`` of ``module``'s entry on ``runtime``, if any."""
    ref = next((m for m in runtime.modules if m.name == module), None)
    return ref.config if ref is not None else None


def resolve_override(
    runtime: Runtime,
    resolved: ResolvedModule,
    channel_config: Mapping[str, Mapping[str, Any]],
) -> ConfigOverride | None:
    """The override of ``resolved`` on ``runtime`` given the ``config`` of its channel (see
    :func:`module_channel`); ``None`` when nothing is enforced."""
    channel_name = module_channel(runtime, resolved.name)
    from_channel = channel_config.get(resolved.name) or {}
    from_runtime = runtime_config(runtime, resolved.name) or {}
    if not from_channel and not from_runtime:
        return None
    spec = merge_config(merge_config({}, from_channel), from_runtime)
    if not spec:
        return None
    runtime_paths = set(_leaf_paths(_without_nulls(from_runtime)))
    fields = tuple(
        EnforcedField(
            path, f"runtime {runtime.name}" if path in runtime_paths else f"channel {channel_name}"
        )
        for path in sorted(_leaf_paths(spec))
    )
    return ConfigOverride(resolved.name, resolved.version, spec, fields)


def apply_override(body: Mapping[str, Any], override: ConfigOverride) -> dict[str, Any]:
    """The configuration CR ``body`` with ``override`` merged into its ``spec``."""
    merged = dict(body)
    merged["spec"] = merge_config(body.get("spec") or {}, override.spec)
    return merged


def _leaf_paths(value: Mapping[str, Any], prefix: FieldPath = ()) -> Iterator[FieldPath]:
    for key, child in value.items():
        path = (*prefix, str(key))
        if isinstance(child, Mapping) and child:
            yield from _leaf_paths(child, path)
        else:
            yield path
