"""Why a templated module's render changed between two revisions at the same version (pure).

A chart module whose version stays the same still changes when one of its layers of values
changes, or the chart's files do. The fleet diff names each as a cause, layer by layer, with the
file and the field (a dotted path into the values): the runtime entry's ``values``
(``runtimes/x.yaml: spec.modules[2].values.replicas``), its ``valuesFrom`` file
(``values/x.yaml: resources.requests.cpu``), the channel's ``spec.values``
(``channels/regular.yaml: spec.values.metrics-proxy.scrapeInterval``), the version's
``values.yaml``, the chart's own defaults (``.../chart/values.yaml: logLevel``) and its other
files (``.../chart: templates/deployment.yaml``). At most
:data:`MAX_FIELDS` fields per layer are named, then how many more. Callers: ``core.fleetdiff``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from reconciler.core.model import Channel, ConfigRepo, ModuleRef, ModuleVersion, Runtime
from reconciler.core.overrides import module_channel

#: Fields named per layer before the rest are counted.
MAX_FIELDS = 5


def template_causes(
    runtimes: tuple[Runtime, Runtime],
    channels: tuple[Channel | None, Channel | None],
    versions: tuple[ModuleVersion, ModuleVersion],
    module: str,
) -> list[tuple[str, str]]:
    """``(path, field)`` of every layer of ``module``'s values or chart files that differs
    between the base (first of each pair) and the head (second)."""
    found: list[tuple[str, str]] = []
    old_ref, new_ref = (_entry(r, module) for r in runtimes)
    found.extend(_entry_causes(runtimes[1], old_ref, new_ref, module))
    old_channel, new_channel = channels
    was = old_channel.values.get(module, {}) if old_channel else {}
    now = new_channel.values.get(module, {}) if new_channel else {}
    channel = new_channel or old_channel
    if channel is not None:
        found.extend(_named(channel.source, f"spec.values.{module}.", changed_paths(was, now)))
    old, new = (v.template for v in versions)
    if old is not None and new is not None:
        found.extend(_named(new.values_path, "", changed_paths(old.values, new.values)))
        defaults = list(changed_paths(old.defaults, new.defaults))
        found.extend(_named(f"{new.root}/values.yaml", "", defaults))
        files = sorted(f for f in {*old.files, *new.files} if old.files.get(f) != new.files.get(f))
        shown = [f for f in files if f != "values.yaml" or not defaults]  # named field by field
        found.extend(_named(new.root, "", shown))
    return found


def rendered_causes(
    repos: tuple[ConfigRepo, ConfigRepo],
    runtimes: tuple[Runtime, Runtime],
    module: str,
    version: str,
) -> list[tuple[str, str]]:
    """``(path, field)`` of what changed ``version`` of ``module``'s render for the runtime
    between the base and the head (nothing for a manifest version)."""
    versions = tuple(r.modules[module].versions.get(version) for r in repos)
    if versions[0] is None or versions[1] is None or versions[1].template is None:
        return []
    channels = tuple(
        repo.channels.get(module_channel(runtime, module))
        for repo, runtime in zip(repos, runtimes, strict=True)
    )
    return template_causes(runtimes, (channels[0], channels[1]), (versions[0], versions[1]), module)


def changed_paths(was: Any, now: Any, prefix: str = "") -> Iterator[str]:
    """Dotted paths where ``now`` differs from ``was`` (mappings key by key, else whole)."""
    if isinstance(was, Mapping) and isinstance(now, Mapping):
        for key in sorted({*was, *now}, key=str):
            yield from changed_paths(was.get(key), now.get(key), f"{prefix}{key}.")
    elif was != now:
        yield prefix.rstrip(".") or "(all values)"


def _entry(runtime: Runtime, module: str) -> tuple[int, ModuleRef] | None:
    return next(((i, m) for i, m in enumerate(runtime.modules) if m.name == module), None)


def _entry_causes(
    runtime: Runtime,
    old: tuple[int, ModuleRef] | None,
    new: tuple[int, ModuleRef] | None,
    module: str,
) -> list[tuple[str, str]]:
    entry = new if new is not None else old
    if entry is None:
        return []
    index, now = entry
    was = old[1] if old is not None else ModuleRef(module)
    at = f"spec.modules[{index}]."
    if was.values_from != now.values_from:
        return [(runtime.source, at + "valuesFrom")]
    in_file = set(changed_paths(was.file_values or {}, now.file_values or {}))
    merged = changed_paths(was.values or {}, now.values or {})
    inline = [p for p in merged if p not in in_file]
    found = _named(runtime.source, at + "values.", inline)
    if now.values_from is not None:
        root = runtime.source.rsplit("runtimes/", 1)[0]  # the repo, as its files are shown
        found.extend(_named(root + now.values_from, "", sorted(in_file)))
    return found


def _named(path: str, prefix: str, fields: Iterator[str] | list[str]) -> list[tuple[str, str]]:
    names = list(fields)
    shown = [(path, prefix + name) for name in names[:MAX_FIELDS]]
    if len(names) > MAX_FIELDS:
        shown.append((path, f"... {len(names) - MAX_FIELDS} more"))
    return shown
