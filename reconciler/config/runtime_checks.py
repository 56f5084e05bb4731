"""The checks of channels and runtimes in one validation pass (pure): a channel's module entries
(C3) and configs (C8), a runtime's fields, ``valuesFrom`` files, resolution (C3, C5) and the
configs it enforces at the versions it runs (C8). Channels come first: a runtime's checks skip
what a broken channel already reported. Callers: ``config.validate``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.config.credentials import find_inline_credentials
from reconciler.config.document_checks import DocumentChecks
from reconciler.config.overrides import OverrideChecker, OverrideFindings
from reconciler.config.raw import RawFile
from reconciler.config.templates import entry_values, values_from_problem, values_mapping
from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic, Pointer, did_you_mean
from reconciler.core.durations import duration_minutes
from reconciler.core.model import Channel, ConfigRepo, Module, Runtime
from reconciler.core.overrides import module_channel
from reconciler.core.resolve import Resolution, resolve_runtime
from reconciler.core.versions import sorted_versions


@dataclass(slots=True)
class RuntimeChecks:
    """The channel and runtime checks of one pass; what they find goes to ``docs``."""

    docs: DocumentChecks
    channels_unavailable: bool = False
    broken_channels: set[str] = field(default_factory=set)
    bad_channel_entries: set[tuple[str, str]] = field(default_factory=set)
    overrides: OverrideChecker = field(default_factory=OverrideChecker)
    channel_documents: dict[str, Document] = field(default_factory=dict)
    #: (channel, module, version): channel configs already checked for that version.
    checked_configs: set[tuple[str, str, str]] = field(default_factory=set)
    #: ``valuesFrom`` files by repo path, and those scanned for credentials already.
    values_files: Mapping[str, RawFile] = field(default_factory=dict)
    values_data: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    runtime_documents: dict[str, Document] = field(default_factory=dict)

    def channel(self, file: RawFile, modules: Mapping[str, Module]) -> Channel | None:
        """The typed channel of a file (``None`` when broken): its entries (C3) and configs (C8)."""
        document = self.docs.single(file, "Channel")
        if document is None or not self.docs.name_matches(document, file.stem, "file name"):
            self.broken_channels.add(file.stem)
            return None
        spec = document.data["spec"]
        channel = Channel(
            file.stem,
            dict(spec["modules"]),
            file.path,
            spec.get("config", {}),
            spec.get("values", {}),
        )
        for module_name, version in channel.modules.items():
            problem = _channel_entry_problem(module_name, version, modules)
            if problem is not None:
                self.bad_channel_entries.add((channel.name, module_name))
                pointer: Pointer = ("spec", "modules", module_name)
                key = problem.startswith("module")
                self.docs.diagnostics.append(document.diagnostic("C3", problem, pointer, key=key))
        self.channel_documents[channel.name] = document
        for module_name, config in channel.config.items():
            self.channel_config(channel, document, module_name, config, modules)
        return channel

    def channel_config(
        self,
        channel: Channel,
        document: Document,
        module_name: str,
        config: Mapping[str, Any],
        modules: Mapping[str, Module],
    ) -> None:
        """C8: a channel's config of a module it serves, checked against the CRD of the
        version it serves (other versions: when a runtime uses it with them)."""
        at: Pointer = ("spec", "config", module_name)
        version = channel.modules.get(module_name)
        if module_name not in modules or version is None:
            message = (
                f"config names module '{module_name}', which channel '{channel.name}' does not "
                "serve: there is no version to check it against"
            ) + did_you_mean(module_name, channel.modules)
            self.docs.diagnostics.append(document.diagnostic("C8", message, at, key=True))
            return
        if (channel.name, module_name) in self.bad_channel_entries:
            return
        self.checked_configs.add((channel.name, module_name, version))
        self.add_findings(
            self.overrides.check(document, at, config, (modules[module_name], version))
        )

    def add_findings(self, findings: OverrideFindings, note: str = "") -> None:
        self.docs.diagnostics.extend(replace(d, message=d.message + note) for d in findings.errors)
        self.docs.warnings.extend(replace(d, message=d.message + note) for d in findings.warnings)

    # -- runtimes ----------------------------------------------------------------------------

    def runtime(self, file: RawFile, repo: ConfigRepo) -> Runtime | None:
        """The typed runtime of a file when it has no error: fields, values, resolution, configs."""
        document = self.docs.single(file, "Runtime")
        if document is None or not self.docs.name_matches(document, file.stem, "file name"):
            return None
        runtime = self.docs.memo.runtime(document, file.path)
        self.runtime_documents[runtime.name] = document
        found = self.runtime_fields(document, runtime)
        runtime = self.runtime_values(document, runtime, found)
        self.docs.memo.carry(repo, runtime)
        resolution = resolve_runtime(repo, runtime)
        for problem in resolution.problems:
            if problem.channel in self.broken_channels or problem.rule == "C3":
                continue
            if self.channels_unavailable and problem.channel is not None:
                continue
            if (problem.channel, problem.module) in self.bad_channel_entries:
                continue
            found.append(document.diagnostic(problem.rule, problem.message, problem.pointer))
        self.docs.diagnostics.extend(found)
        if not resolution.problems:
            found.extend(self.runtime_configs(document, resolution, repo))
        return runtime if not found else None

    def runtime_configs(
        self, document: Document, resolution: Resolution, repo: ConfigRepo
    ) -> list[Diagnostic]:
        """C8: the runtime's own configs, and its channels' configs of the modules it runs at
        a version they were not checked for yet; the runtime's errors are returned."""
        runtime = resolution.runtime
        if all(r.config is None for r in runtime.modules) and not any(
            c.config for c in repo.channels.values()
        ):
            return []  # no config anywhere to check (the common case)
        index = {ref.name: i for i, ref in enumerate(runtime.modules)}
        errors: list[Diagnostic] = []
        for resolved in resolution.modules:
            module = repo.modules[resolved.name]
            ref = runtime.modules[index[resolved.name]] if resolved.name in index else None
            if ref is not None and ref.config is not None:
                at: Pointer = ("spec", "modules", index[resolved.name], "config")
                findings = self.overrides.check(
                    document, at, ref.config, (module, resolved.version)
                )
                errors.extend(findings.errors)
                self.add_findings(findings)
            channel_name = module_channel(runtime, resolved.name)
            key = (channel_name, resolved.name, resolved.version)
            config = repo.channels[channel_name].config.get(resolved.name)
            if config is None or key in self.checked_configs:
                continue
            self.checked_configs.add(key)
            channel_document = self.channel_documents[channel_name]
            at = ("spec", "config", resolved.name)
            findings = self.overrides.check(
                channel_document, at, config, (module, resolved.version)
            )
            note = f" [with version {resolved.version}, as runtime '{runtime.name}' runs it]"
            self.add_findings(findings, note)
        return errors

    def runtime_values(
        self, document: Document, runtime: Runtime, found: list[Diagnostic]
    ) -> Runtime:
        """The runtime with each module entry's ``valuesFrom`` file merged under its
        ``values``; problems of the files are added to ``found``."""
        if all(ref.values_from is None for ref in runtime.modules):
            return runtime
        refs = []
        for index, ref in enumerate(runtime.modules):
            if ref.values_from is None:
                refs.append(ref)
                continue
            at: Pointer = ("spec", "modules", index, "valuesFrom")
            problem = values_from_problem(document, at, ref.values_from)
            file = self.values_files.get(ref.values_from)
            if problem is None and file is None:
                message = f"valuesFrom file '{ref.values_from}' does not exist in the repo"
                problem = document.diagnostic("C2", message, at)
            found.extend([problem] if problem is not None else [])
            values = self.values_data.get(ref.values_from)
            merged = entry_values(ref.values, values)
            refs.append(replace(ref, values=merged, file_values=values))
        return replace(runtime, modules=tuple(refs))

    def values_files_checked(self) -> None:
        """Every ``valuesFrom`` file: one mapping document, scanned for credentials (C6),
        reported once however many runtimes name it."""
        for path, file in self.values_files.items():
            values, problems = values_mapping(file, "a valuesFrom file")
            self.docs.diagnostics.extend(problems)
            if values is not None:
                self.docs.diagnostics.extend(find_inline_credentials(values, self.docs.budget))
                self.values_data[path] = values.data
                self.docs.value_documents[path] = values

    def runtime_fields(self, document: Document, runtime: Runtime) -> list[Diagnostic]:
        found: list[Diagnostic] = []
        first_index: dict[str, int] = {}
        for index, ref in enumerate(runtime.modules):
            if ref.name not in first_index:
                first_index[ref.name] = index
                continue
            first = document.position(("spec", "modules", first_index[ref.name], "name")).line
            message = f"module '{ref.name}' is listed twice (first on line {first})"
            found.append(document.diagnostic("C4", message, ("spec", "modules", index, "name")))
        window = document.data["spec"].get("maintenanceWindow")
        if window is not None:
            found.extend(_window_problems(document, window))
        return found


def _channel_entry_problem(name: str, version: str, modules: Mapping[str, Module]) -> str | None:
    module = modules.get(name)
    if module is None:
        return f"module '{name}' does not exist" + did_you_mean(name, modules)
    if version not in module.versions:
        known = ", ".join(sorted_versions(list(module.versions))) or "none"
        return f"module '{name}' has no version {version} (versions: {known})"
    return None


def _window_problems(document: Document, window: Mapping[str, Any]) -> Iterator[Diagnostic]:
    minutes = duration_minutes(window["duration"])
    if minutes == 0 or minutes > 24 * 60:
        message = "duration must be more than 0 and at most 24h"
        yield document.diagnostic("C1", message, ("spec", "maintenanceWindow", "duration"))
    zone = window.get("timezone", "UTC")
    if not _known_zone(zone):
        from zoneinfo import available_timezones

        hint = did_you_mean(zone, available_timezones()) or " (e.g. Europe/Berlin)"
        message = f"timezone is not a known IANA time zone{hint}"
        yield document.diagnostic("C1", message, ("spec", "maintenanceWindow", "timezone"))


_ZONES: dict[str, bool] = {}


def _known_zone(name: str) -> bool:
    known = _ZONES.get(name)
    if known is None:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # only for a maintenance window

        try:
            ZoneInfo(name)
            known = True
        except (ZoneInfoNotFoundError, ValueError):
            known = False
        _ZONES[name] = known
    return known
