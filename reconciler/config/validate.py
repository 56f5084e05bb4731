"""Validation of a whole config repo in one pass (rules C1-C6; C7 follows from it) (pure).

Input is a :class:`RawRepo`: every file of the repo already read and parsed by the loader, with
the problems met while reading. Output is a :class:`Validation`: the typed
:class:`~reconciler.core.model.ConfigRepo` when there is no error, and every diagnostic, sorted. A
file that is broken (unreadable, or failing its schema) still counts as existing, so that one
mistake gives one error and not a cascade in the files that refer to it. Callers: the loader's
``load_repo`` (CLI, daemon, tests, benchmark).

This module runs the pass and renders what it must; the checks live beside it: of single
documents (``config.document_checks``), of modules (``config.module_checks``), of channels and
runtimes (``config.runtime_checks``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from reconciler.config.budget import TimeBudget, budget_diagnostic
from reconciler.config.builders import settings_from
from reconciler.config.chart_values import ValuesDocuments, check_chart_values
from reconciler.config.document_checks import DocumentChecks
from reconciler.config.memo import CheckMemo
from reconciler.config.module_checks import ModuleChecks
from reconciler.config.ownership import shared_objects
from reconciler.config.raw import RawFile, RawRepo
from reconciler.config.remotes import ref_problem, remote_problem
from reconciler.config.runtime_checks import RuntimeChecks
from reconciler.config.schema import SchemaChecker
from reconciler.config.settings_checks import StepTraits, settings_problems
from reconciler.config.templates import render_problems
from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic, sort_diagnostics
from reconciler.core.model import ConfigRepo, Settings
from reconciler.core.resolve import RESOLUTIONS
from reconciler.core.templates import Capabilities, RenderCache, TemplateRenderer, render_repo
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
    capabilities: Mapping[str, Capabilities] | None = None,
) -> Validation:
    """Check ``raw`` against every config rule; see the module docstring. With a ``budget``,
    checking a file past its time is a C6 diagnostic for it, past the commit's time the only
    diagnostic. A ``memo`` shared by several validations checks a document they share once.
    With a ``renderer``, every templated module a runtime gets is rendered (through
    ``render_cache``) into :attr:`ConfigRepo.rendered`, for each runtime's cluster's
    ``capabilities`` (else the engine's defaults); a render that fails is a C9 error.
    Without one, they are left unrendered (the core refuses to use them; core.templates)."""
    try:
        config = _validate(raw, checker, budget, memo or CheckMemo())
        if renderer is None or config.repo is None:
            return config
        cache = render_cache or RenderCache()
        return _rendered(config, config.repo, renderer, cache, capabilities or {})
    except OverBudgetError as over:  # the commit's time is up: nothing else is worth saying
        return Validation(None, (budget_diagnostic(over, ".", 1, 1),), _count_files(raw))


def _validate(
    raw: RawRepo, checker: SchemaChecker, budget: TimeBudget | None, memo: CheckMemo
) -> Validation:
    docs = DocumentChecks(checker, list(raw.problems), budget=budget, memo=memo)
    module_checks = ModuleChecks(docs)
    runtime_checks = RuntimeChecks(
        docs, channels_unavailable=raw.channels_unavailable, values_files=raw.values_files
    )
    settings = _settings(docs, raw.settings, raw.plugin_steps)
    modules = {m.name: module_checks.module(m) for m in raw.modules}
    module_checks.dependencies(modules, {m.name: m for m in raw.modules})
    docs.diagnostics.extend(shared_objects(raw.modules, modules))
    channels = {f.stem: runtime_checks.channel(f, modules) for f in raw.channels}
    repo = ConfigRepo(
        settings,
        {},
        modules,
        {name: c for name, c in channels.items() if c is not None},
    )
    runtime_checks.values_files_checked()
    memo.start(repo)
    runtimes = {f.stem: runtime_checks.runtime(f, repo) for f in raw.runtimes}
    documents = ValuesDocuments(
        runtime_checks.runtime_documents, runtime_checks.channel_documents, docs.value_documents
    )
    errors, unused = check_chart_values(repo, runtimes, documents)
    docs.diagnostics.extend(errors)
    docs.warnings.extend(unused)
    diagnostics = tuple(sort_diagnostics(docs.diagnostics))
    files = _count_files(raw)
    warnings = tuple(sort_diagnostics([*_warnings(raw), *docs.warnings]))
    if diagnostics:
        return Validation(None, diagnostics, files, warnings)
    valid_runtimes = {name: r for name, r in runtimes.items() if r is not None}
    config = ConfigRepo(settings, valid_runtimes, modules, repo.channels)
    RESOLUTIONS.share(repo, config)  # the same modules and channels: the same answers
    return Validation(config, (), files, warnings)


def _rendered(
    validation: Validation,
    repo: ConfigRepo,
    renderer: TemplateRenderer,
    cache: RenderCache,
    capabilities: Mapping[str, Capabilities],
) -> Validation:
    """``validation`` with the templated modules of its repo rendered, or their C9 errors."""
    rendered, failures = render_repo(repo, renderer, cache, capabilities)
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


def _settings(
    docs: DocumentChecks, file: RawFile | None, plugin_steps: Mapping[str, StepTraits]
) -> Settings:
    document = docs.single(file, "Settings") if file is not None else None
    if document is None:
        return Settings()
    docs.diagnostics.extend(_remote_problems(document))
    docs.diagnostics.extend(settings_problems(document, plugin_steps))
    return settings_from(document.data.get("spec", {}))


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
