"""Validation of a whole config repo in one pass (rules C1-C6; C7 follows from it) (pure).

Input is a :class:`RawRepo`: every file of the repo already read and parsed by the loader, with
the problems met while reading. Output is a :class:`Validation`: the typed
:class:`~reconciler.core.model.ConfigRepo` when there is no error, and every diagnostic, sorted. A
file that is broken (unreadable, or failing its schema) still counts as existing, so that one
mistake gives one error and not a cascade in the files that refer to it. Callers: the loader's
``load_repo`` (CLI, daemon, tests, benchmark).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from reconciler.config.budget import TimeBudget, budget_diagnostic
from reconciler.config.builders import module_from, settings_from
from reconciler.config.chart_values import ValuesDocuments, check_chart_values
from reconciler.config.credentials import find_inline_credentials
from reconciler.config.manifests import object_problems, operator_version_problems
from reconciler.config.memo import CheckMemo
from reconciler.config.overrides import OverrideChecker, OverrideFindings
from reconciler.config.ownership import shared_objects
from reconciler.config.raw import RawFile, RawModule, RawRepo, RawVersion
from reconciler.config.remotes import ref_problem, remote_problem
from reconciler.config.schema import SchemaChecker
from reconciler.config.settings_checks import settings_problems
from reconciler.config.sources import source_problems
from reconciler.config.templates import (
    declared_kind_problem,
    entry_values,
    render_problems,
    template_source,
    values_from_problem,
    values_mapping,
    version_kind,
)
from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic, Pointer, did_you_mean, sort_diagnostics
from reconciler.core.durations import duration_minutes
from reconciler.core.model import (
    LABEL_APP_VERSION,
    Channel,
    ConfigRepo,
    Module,
    ModuleKind,
    ModuleVersion,
    Runtime,
    Settings,
)
from reconciler.core.overrides import module_channel
from reconciler.core.resolve import RESOLUTIONS, Resolution, resolve_runtime
from reconciler.core.templates import RenderCache, TemplateRenderer, render_repo
from reconciler.core.versions import is_version, sorted_versions
from reconciler.errors import OverBudgetError


@dataclass(frozen=True, slots=True)
class Validation:
    """The verdict on a repo: the typed repo when valid, and every diagnostic."""

    repo: ConfigRepo | None
    diagnostics: tuple[Diagnostic, ...]
    files: int = 0
    #: Plain scalars that Kubernetes reads in a way that may surprise (rules Y1, Y2 of
    #: docs/yaml.md): never errors, whatever their number.
    warnings: tuple[Diagnostic, ...] = ()

    @property
    def valid(self) -> bool:
        """No diagnostic at all."""
        return not self.diagnostics


def validate_repo(
    raw: RawRepo,
    checker: SchemaChecker,
    *,
    budget: TimeBudget | None = None,
    memo: CheckMemo | None = None,
    renderer: TemplateRenderer | None = None,
    render_cache: RenderCache | None = None,
) -> Validation:
    """Check ``raw`` against every config rule; see the module docstring. With a ``budget``,
    checking a file past its time is a C6 diagnostic for it, past the commit's time the only
    diagnostic. A ``memo`` shared by several validations checks a document they share once.
    With a ``renderer``, every templated module a runtime gets is rendered (through
    ``render_cache``) into :attr:`ConfigRepo.rendered`; a render that fails is a C9 error.
    Without one, they are left unrendered (the core refuses to use them; core.templates)."""
    try:
        config = _validate(raw, checker, budget, memo or CheckMemo())
        if renderer is None or config.repo is None:
            return config
        return _rendered(config, config.repo, renderer, render_cache or RenderCache())
    except OverBudgetError as over:  # the commit's time is up: nothing else is worth saying
        return Validation(None, (budget_diagnostic(over, ".", 1, 1),), _count_files(raw))


def _validate(
    raw: RawRepo, checker: SchemaChecker, budget: TimeBudget | None, memo: CheckMemo
) -> Validation:
    run = _Run(
        checker,
        list(raw.problems),
        channels_unavailable=raw.channels_unavailable,
        budget=budget,
        memo=memo,
        values_files=raw.values_files,
    )
    settings = run.settings(raw.settings, raw.plugin_steps)
    modules = {m.name: run.module(m) for m in raw.modules}
    run.dependencies(modules, {m.name: m for m in raw.modules})
    run.diagnostics.extend(shared_objects(raw.modules, modules))
    channels = {f.stem: run.channel(f, modules) for f in raw.channels}
    repo = ConfigRepo(
        settings,
        {},
        modules,
        {name: c for name, c in channels.items() if c is not None},
    )
    run.values_files_checked()
    memo.start(repo)
    runtimes = {f.stem: run.runtime(f, repo) for f in raw.runtimes}
    documents = ValuesDocuments(run.runtime_documents, run.channel_documents, run.value_documents)
    errors, unused = check_chart_values(repo, runtimes, documents)
    run.diagnostics.extend(errors)
    run.warnings.extend(unused)
    diagnostics = tuple(sort_diagnostics(run.diagnostics))
    files = _count_files(raw)
    warnings = tuple(sort_diagnostics([*_warnings(raw), *run.warnings]))
    if diagnostics:
        return Validation(None, diagnostics, files, warnings)
    valid_runtimes = {name: r for name, r in runtimes.items() if r is not None}
    config = ConfigRepo(settings, valid_runtimes, modules, repo.channels)
    RESOLUTIONS.share(repo, config)  # the same modules and channels: the same answers
    return Validation(config, (), files, warnings)


def _rendered(
    validation: Validation, repo: ConfigRepo, renderer: TemplateRenderer, cache: RenderCache
) -> Validation:
    """``validation`` with the templated modules of its repo rendered, or their C9 errors."""
    rendered, failures = render_repo(repo, renderer, cache)
    refused = render_problems(repo, rendered)
    if not failures and not refused:
        config = replace(repo, rendered=rendered)
        RESOLUTIONS.share(repo, config)
        return replace(validation, repo=config)
    seen: dict[tuple[str, str, str], list[str]] = {}
    blamed: dict[tuple[str, str, str], str] = {}  # the file the engine named, if it did
    for failure in failures:
        key = (failure.module, failure.version, failure.message)
        seen.setdefault(key, []).append(failure.runtime)
        blamed.setdefault(key, failure.path)
    diagnostics = list(refused)
    for (module, version, message), runtimes in seen.items():
        where = repo.modules[module].versions[version].template
        path = blamed[(module, version, message)] or (where.root if where is not None else module)
        count = f" and {len(runtimes) - 1} more" if len(runtimes) > 1 else ""
        text = f"module {module} {version} does not render for runtime {runtimes[0]}{count}: "
        diagnostics.append(Diagnostic(path, 1, 1, "C9", text + message))
    return replace(validation, repo=None, diagnostics=tuple(sort_diagnostics(diagnostics)))


def _warnings(raw: RawRepo) -> list[Diagnostic]:
    """The warnings the YAML reader attached to every document of ``raw``."""
    files: list[RawFile | None] = [raw.settings, *raw.runtimes, *raw.channels]
    for module in raw.modules:
        files.append(module.module)
        files.extend(f for v in module.versions for f in (v.manifest, v.default))
    return [w for f in files if f is not None for d in f.documents for w in d.warnings]


def _count_files(raw: RawRepo) -> int:
    count = len(raw.runtimes) + len(raw.channels) + (raw.settings is not None)
    for module in raw.modules:
        count += module.module is not None
        count += sum((v.manifest is not None) + (v.default is not None) for v in module.versions)
    return count


@dataclass(slots=True)
class _Run:
    """State of one validation pass: the checker and the diagnostics found so far."""

    checker: SchemaChecker
    diagnostics: list[Diagnostic]
    broken_channels: set[str] = field(default_factory=set)
    channels_unavailable: bool = False
    bad_channel_entries: set[tuple[str, str]] = field(default_factory=set)
    budget: TimeBudget | None = None
    memo: CheckMemo = field(default_factory=CheckMemo)
    warnings: list[Diagnostic] = field(default_factory=list)
    overrides: OverrideChecker = field(default_factory=OverrideChecker)
    channel_documents: dict[str, Document] = field(default_factory=dict)
    #: (channel, module, version): channel configs already checked for that version.
    checked_configs: set[tuple[str, str, str]] = field(default_factory=set)
    #: ``valuesFrom`` files by repo path, and those scanned for credentials already.
    values_files: Mapping[str, RawFile] = field(default_factory=dict)
    values_data: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Where values are written (runtimes, values files), for C9 values errors.
    value_documents: dict[str, Document] = field(default_factory=dict)
    runtime_documents: dict[str, Document] = field(default_factory=dict)

    def timed(self, document: Document, check: Callable[[], bool]) -> bool:
        """``check()`` of ``document`` within its file's time budget; past it, what the check
        found is dropped for one C6 diagnostic at the document, and the document fails."""
        if self.budget is None:
            return check()
        try:
            with self.budget.file(document.path):
                return check()
        except OverBudgetError as over:
            place = document.position(())
            diagnostic = budget_diagnostic(over, document.path, place.line, place.column)
            if over.scope != "file":
                raise
            self.diagnostics.append(diagnostic)
            return False

    # -- single documents ------------------------------------------------------------------

    def single(self, file: RawFile, kind: str) -> Document | None:
        """The one document of ``file`` if it passes its schema, else ``None`` (reported)."""
        if file.broken:
            return None
        if not file.documents:
            self.diagnostics.append(file.at("C1", f"file is empty; expected one {kind} document"))
            return None
        if len(file.documents) > 1:
            extra = file.documents[1]
            message = f"expected one {kind} document, found {len(file.documents)}"
            self.diagnostics.append(extra.diagnostic("C1", message, ()))
            return None
        document = file.documents[0]
        return document if self.timed(document, lambda: self.schema_ok(kind, document)) else None

    def schema_ok(self, kind: str, document: Document) -> bool:
        found = self.memo.found(kind, document, lambda: self.schema_problems(kind, document))
        self.diagnostics.extend(found)
        return not found

    def schema_problems(self, kind: str, document: Document) -> list[Diagnostic]:
        found = self.checker.check(kind, document, self.budget)
        credentials = find_inline_credentials(document, self.budget)
        if credentials:  # a credential explains its own unknown-field error
            places = {d.pointer for d in credentials}
            found = [d for d in found if d.pointer not in places]
        return found + credentials

    def name_matches(self, document: Document, expected: str, what: str) -> bool:
        name = document.data["metadata"]["name"]
        if name == expected:
            return True
        message = f"metadata.name '{name}' must equal the {what} '{expected}'"
        self.diagnostics.append(document.diagnostic("C4", message, ("metadata", "name")))
        return False

    # -- settings ----------------------------------------------------------------------------

    def settings(self, file: RawFile | None, plugin_steps: Mapping[str, bool]) -> Settings:
        document = self.single(file, "Settings") if file is not None else None
        if document is None:
            return Settings()
        self.diagnostics.extend(_remote_problems(document))
        self.diagnostics.extend(settings_problems(document, plugin_steps))
        return settings_from(document.data.get("spec", {}))

    # -- modules -----------------------------------------------------------------------------

    def module(self, raw: RawModule) -> Module:
        versions = {v.name: self.version(v) for v in raw.versions if self.version_name_ok(v)}
        if raw.module is None:
            self.diagnostics.append(
                Diagnostic(
                    raw.path + "/module.yaml", 1, 1, "C2", "module folder has no module.yaml"
                )
            )
            return _placeholder_module(raw.name, versions)
        document = self.single(raw.module, "Module")
        if document is None:  # still in the cross-file checks with the fields that are valid
            return _placeholder_module(raw.name, versions, _valid_dependencies(raw.module))
        if not self.name_matches(document, raw.name, "module folder name"):
            return _placeholder_module(raw.name, versions)
        module = module_from(document.data, versions, raw.module.path)
        self.module_versions_metadata(document, versions)
        self.operators(module, raw, document)
        return module

    def version_name_ok(self, raw: RawVersion) -> bool:
        if is_version(raw.name):
            return True
        message = f"version folder '{raw.name}' is not a semantic version (e.g. 1.2.3)"
        self.diagnostics.append(Diagnostic(raw.path, 1, 1, "C4", message))
        return False

    def version(self, raw: RawVersion) -> ModuleVersion:
        kind, problem = version_kind(raw)
        if kind is None or problem is not None:
            self.diagnostics.extend([problem] if problem is not None else [])
            return ModuleVersion(raw.name, ())
        if kind is ModuleKind.SOURCE and self.source(raw.source) is None:
            return ModuleVersion(raw.name, ())  # reported
        if kind.templated:
            return self.templated_version(raw, kind)
        assert raw.manifest is not None
        objects = [d.data for d in raw.manifest.documents if self.kubernetes_object(d)]
        if not raw.manifest.broken and not raw.manifest.documents:
            self.diagnostics.append(raw.manifest.at("C1", "manifest has no objects"))
        default = self.default_configuration(raw.default)
        return ModuleVersion(raw.name, tuple(objects), default)

    def templated_version(self, raw: RawVersion, kind: ModuleKind) -> ModuleVersion:
        """A chart, overlay or source version: its files and ``values.yaml``, checked for
        credentials (C6); its objects are rendered per runtime after resolution."""
        values, problems = values_mapping(raw.values, "values.yaml")
        self.diagnostics.extend(problems)
        if values is not None:
            self.diagnostics.extend(find_inline_credentials(values, self.budget))
            self.value_documents[values.path] = values
        default = self.default_configuration(raw.default)
        template = template_source(raw, kind, values)
        return ModuleVersion(raw.name, (), default, kind=kind, template=template)

    def source(self, file: RawFile | None) -> Document | None:
        """The checked document of a ``source.yaml`` (schema, C6, :func:`source_problems`)."""
        document = self.single(file, "Source") if file is not None else None
        problems = source_problems(document) if document is not None else []
        self.diagnostics.extend(problems)
        return None if problems else document

    def kubernetes_object(self, document: Document) -> bool:
        return self.timed(document, lambda: self.object_ok(document))

    def object_ok(self, document: Document) -> bool:
        problems = self.memo.found("object", document, lambda: self.object_problems(document))
        self.diagnostics.extend(problems)
        return not problems

    def object_problems(self, document: Document) -> list[Diagnostic]:
        problems = list(object_problems(document))
        problems.extend(find_inline_credentials(document, self.budget))
        return problems

    def default_configuration(self, file: RawFile | None) -> Mapping[str, Any] | None:
        if file is None or file.broken:
            return None
        if len(file.documents) != 1:
            at = file.documents[1] if len(file.documents) > 1 else None
            message = f"default configuration must be one document, found {len(file.documents)}"
            self.diagnostics.append(
                at.diagnostic("C1", message, ()) if at else file.at("C1", message)
            )
            return None
        document = file.documents[0]
        return document.data if self.kubernetes_object(document) else None

    def module_versions_metadata(self, document: Document, versions: Mapping[str, Any]) -> None:
        declared = document.data["spec"].get("versions", {})
        for version, metadata in declared.items():
            if version not in versions:
                message = f"version {version} has no folder" + did_you_mean(version, versions)
                pointer: Pointer = ("spec", "versions", version)
                self.diagnostics.append(document.diagnostic("C4", message, pointer, key=True))
            elif "kind" in metadata and (versions[version].objects or versions[version].template):
                problem = declared_kind_problem(
                    document, version, metadata["kind"], versions[version].kind
                )
                self.diagnostics.extend([problem] if problem is not None else [])

    def operators(self, module: Module, raw: RawModule, document: Document) -> None:
        by_version = {v.name: v for v in raw.versions}
        for name, version in sorted(module.versions.items()):
            raw_version = by_version[name]
            if raw_version.manifest is None or raw_version.manifest.broken or not version.objects:
                continue
            valid = {id(o) for o in version.objects}
            operator = [
                d
                for d in raw_version.manifest.documents
                if id(d.data) in valid and _is_operator(d.data, module)
            ]
            for found in operator:
                self.diagnostics.extend(operator_version_problems(found, LABEL_APP_VERSION, name))
            if not operator:
                message = (
                    f"the manifest of version {name} has no {module.operator_kind} "
                    f"'{module.operator_name}' (the module's operator)"
                )
                pointer: Pointer = ("spec", "operator", "name")
                self.diagnostics.append(document.diagnostic("C2", message, pointer))

    def dependencies(self, modules: Mapping[str, Module], raw: Mapping[str, RawModule]) -> None:
        for name, module in sorted(modules.items()):
            document = _module_document(raw[name])
            for index, dep in enumerate(module.depends_on):
                if dep not in modules:
                    message = f"dependsOn names module '{dep}', which does not exist" + (
                        did_you_mean(dep, modules)
                    )
                    pointer: Pointer = ("spec", "dependsOn", index)
                    self.diagnostics.append(_diag(document, raw[name], "C5", message, pointer))
        for cycle in _cycles(modules):
            first = cycle[0]
            index = modules[first].depends_on.index(cycle[1])
            message = "dependency cycle: " + " -> ".join((*cycle, first))
            pointer = ("spec", "dependsOn", index)
            self.diagnostics.append(
                _diag(_module_document(raw[first]), raw[first], "C5", message, pointer)
            )

    # -- channels ----------------------------------------------------------------------------

    def channel(self, file: RawFile, modules: Mapping[str, Module]) -> Channel | None:
        document = self.single(file, "Channel")
        if document is None or not self.name_matches(document, file.stem, "file name"):
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
                self.diagnostics.append(document.diagnostic("C3", problem, pointer, key=key))
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
            self.diagnostics.append(document.diagnostic("C8", message, at, key=True))
            return
        if (channel.name, module_name) in self.bad_channel_entries:
            return
        self.checked_configs.add((channel.name, module_name, version))
        self.add_findings(
            self.overrides.check(document, at, config, (modules[module_name], version))
        )

    def add_findings(self, findings: OverrideFindings, note: str = "") -> None:
        self.diagnostics.extend(replace(d, message=d.message + note) for d in findings.errors)
        self.warnings.extend(replace(d, message=d.message + note) for d in findings.warnings)

    # -- runtimes ----------------------------------------------------------------------------

    def runtime(self, file: RawFile, repo: ConfigRepo) -> Runtime | None:
        document = self.single(file, "Runtime")
        if document is None or not self.name_matches(document, file.stem, "file name"):
            return None
        runtime = self.memo.runtime(document, file.path)
        self.runtime_documents[runtime.name] = document
        found = self.runtime_fields(document, runtime)
        runtime = self.runtime_values(document, runtime, found)
        self.memo.carry(repo, runtime)
        resolution = resolve_runtime(repo, runtime)
        for problem in resolution.problems:
            if problem.channel in self.broken_channels or problem.rule == "C3":
                continue
            if self.channels_unavailable and problem.channel is not None:
                continue
            if (problem.channel, problem.module) in self.bad_channel_entries:
                continue
            found.append(document.diagnostic(problem.rule, problem.message, problem.pointer))
        self.diagnostics.extend(found)
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
            self.diagnostics.extend(problems)
            if values is not None:
                self.diagnostics.extend(find_inline_credentials(values, self.budget))
                self.values_data[path] = values.data
                self.value_documents[path] = values

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
        hint = did_you_mean(zone, available_timezones()) or " (e.g. Europe/Berlin)"
        message = f"timezone is not a known IANA time zone{hint}"
        yield document.diagnostic("C1", message, ("spec", "maintenanceWindow", "timezone"))


_ZONES: dict[str, bool] = {}


def _known_zone(name: str) -> bool:
    known = _ZONES.get(name)
    if known is None:
        try:
            ZoneInfo(name)
            known = True
        except (ZoneInfoNotFoundError, ValueError):
            known = False
        _ZONES[name] = known
    return known


def _is_operator(obj: Mapping[str, Any], module: Module) -> bool:
    return (
        obj.get("kind") == module.operator_kind
        and str(obj.get("apiVersion", "")).startswith("apps/")
        and obj.get("metadata", {}).get("name") == module.operator_name
    )


def _module_document(raw: RawModule) -> Document | None:
    if raw.module is None or not raw.module.documents:
        return None
    return raw.module.documents[0]


def _diag(
    document: Document | None, raw: RawModule, rule: str, message: str, pointer: Pointer
) -> Diagnostic:
    if document is not None:
        return document.diagnostic(rule, message, pointer)
    return Diagnostic(raw.path + "/module.yaml", 1, 1, rule, message)


def _cycles(modules: Mapping[str, Module]) -> list[tuple[str, ...]]:
    """Each dependency cycle once, rotated to start at its smallest name."""
    found: set[tuple[str, ...]] = set()
    for start in sorted(modules):
        _walk_cycles(modules, start, (start,), found)
    return sorted(found)


def _walk_cycles(
    modules: Mapping[str, Module], node: str, path: tuple[str, ...], found: set[tuple[str, ...]]
) -> None:
    for dep in modules[node].depends_on:
        if dep not in modules:
            continue
        if dep == path[0]:
            smallest = path.index(min(path))
            found.add(path[smallest:] + path[:smallest])
        elif dep not in path and dep > path[0]:
            _walk_cycles(modules, dep, (*path, dep), found)


def _placeholder_module(
    name: str, versions: Mapping[str, ModuleVersion], depends_on: tuple[str, ...] = ()
) -> Module:
    """Stands in for a module whose module.yaml is broken, so references to it still resolve
    (and its dependencies, when they are valid, are still checked: C5)."""
    return Module(name, "", "", "", versions, depends_on=depends_on)


def _valid_dependencies(file: RawFile) -> tuple[str, ...]:
    """``spec.dependsOn`` of a Module document that failed its schema for another field: a list
    of names, or nothing (an invalid ``dependsOn`` has its own diagnostic)."""
    if file.broken or len(file.documents) != 1:
        return ()
    data = file.documents[0].data
    spec = data.get("spec") if isinstance(data, dict) else None
    names = spec.get("dependsOn") if isinstance(spec, dict) else None
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        return ()
    return tuple(names)


def _remote_problems(document: Document) -> Iterator[Diagnostic]:
    """C6: ``channelsFrom.git`` is a remote git may fetch for a commit (never a local path,
    ``file://``, ``ext::``, an option or a URL with credentials) and its ``ref`` a plain name;
    the value is not repeated (it may be a password or a payload)."""
    channels = document.data.get("spec", {}).get("channelsFrom", {})
    url, ref = channels.get("git"), channels.get("ref")
    if isinstance(url, str) and (problem := remote_problem(url)) is not None:
        pointer = ("spec", "channelsFrom", "git")
        yield document.diagnostic("C6", f"channelsFrom.git {problem}", pointer)
    if isinstance(url, str) and isinstance(ref, str) and (problem := ref_problem(ref)):
        pointer = ("spec", "channelsFrom", "ref")
        yield document.diagnostic("C6", f"channelsFrom.ref {problem}", pointer)


# -- building typed values from schema-valid data -------------------------------------------
