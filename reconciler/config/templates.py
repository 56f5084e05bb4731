"""Checks and typed values of templated module versions and their values (pure).

A version folder's kind is decided by the one file it holds (docs/charts.md): ``manifest.yaml``
(manifest), ``chart/Chart.yaml`` (chart), ``kustomization.yaml`` (kustomize) or ``source.yaml``
(source); none or several is a C2/C4 error, and ``spec.versions.<v>.kind`` in ``module.yaml``,
when given, must agree (C4). Values come from the version's ``values.yaml``, a channel's
``spec.values`` and a runtime's module entry (``valuesFrom`` a file of the repo, then
``values``): each must be a mapping, and a ``valuesFrom`` file one mapping document inside the
repo, scanned for credentials like every other file (C6). Helm hooks run in their phases
(core.hooks); a hook that cannot be run as Helm runs it (Helm 2's ``crd-install``), or any hook
of a module stating ``spec.hooks: Refuse``, is a C9 error naming the chart and the hook
(docs/charts.md). Callers: the validator.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping
from typing import Any

from reconciler.config.raw import RawFile, RawVersion
from reconciler.config.yamlsafe import Document, parse_yaml
from reconciler.core.diagnostics import Diagnostic, Pointer
from reconciler.core.hooks import HOOK_ANNOTATION, TEST_PHASES, hook_of, hook_problems
from reconciler.core.model import (
    LABEL_APP_VERSION,
    ConfigRepo,
    HookPolicy,
    Module,
    ModuleKind,
    RenderedTemplate,
    TemplateSource,
)
from reconciler.core.resolve import resolve_runtime
from reconciler.core.templates import merge_values
from reconciler.core.versions import parse_running_version

#: The file that marks each kind, in the order they are named in messages.
MARKERS: Mapping[str, ModuleKind] = {
    "manifest.yaml": ModuleKind.MANIFEST,
    "chart/Chart.yaml": ModuleKind.CHART,
    "kustomization.yaml": ModuleKind.KUSTOMIZE,
    "source.yaml": ModuleKind.SOURCE,
}


def version_kind(raw: RawVersion) -> tuple[ModuleKind | None, Diagnostic | None]:
    """The kind of a version folder, or the reason it has none."""
    if len(raw.markers) == 1:
        return MARKERS[raw.markers[0]], None
    if not raw.markers:
        message = "version folder has no manifest.yaml"  # nor a file of another kind
        return None, Diagnostic(raw.path + "/manifest.yaml", 1, 1, "C2", message)
    found = " and ".join(raw.markers)
    message = f"version folder holds {found}: one kind per version (keep one of them)"
    return None, Diagnostic(f"{raw.path}/{raw.markers[1]}", 1, 1, "C4", message)


def declared_kind_problem(
    document: Document, version: str, declared: str, kind: ModuleKind
) -> Diagnostic | None:
    """C4: ``spec.versions.<version>.kind`` of ``module.yaml`` against the folder's kind."""
    if declared == kind.value:
        return None
    message = f"version {version} is declared kind '{declared}' but its folder holds a {kind.value}"
    return document.diagnostic("C4", message, ("spec", "versions", version, "kind"))


def values_mapping(file: RawFile | None, what: str) -> tuple[Document | None, list[Diagnostic]]:
    """The one mapping document of a values file (an empty file is no values), or problems."""
    if file is None or file.broken or not file.documents:
        return None, []
    if len(file.documents) > 1:
        message = f"{what} must be one document, found {len(file.documents)}"
        return None, [file.documents[1].diagnostic("C1", message, ())]
    document = file.documents[0]
    if document.data is None:
        return None, []
    if not isinstance(document.data, Mapping):
        return None, [document.diagnostic("C1", f"{what} must be a mapping of values", ())]
    return document, []


def template_source(raw: RawVersion, kind: ModuleKind, values: Document | None) -> TemplateSource:
    """The typed template of a version folder (its files as the loader read them)."""
    data: Mapping[str, Any] = values.data if values is not None else {}
    values_path = raw.values.path if raw.values is not None else ""
    if raw.template is None:  # a source: what it names is fetched by the renderer's edge
        source = raw.source
        body = source.documents[0].data if source is not None and source.documents else {}
        text = repr(sorted(body.items())) if isinstance(body, Mapping) else ""
        files = {"source.yaml": text.encode()}
        return TemplateSource(kind, "source:" + text, files, raw.path, data, values_path)
    chart_files = raw.template.files
    return TemplateSource(
        kind,
        raw.template.digest,
        chart_files,
        raw.template.root,
        data,
        values_path,
        defaults=chart_defaults(chart_files.get("values.yaml", b""))
        if kind is ModuleKind.CHART
        else {},
    )


def chart_defaults(text: bytes) -> Mapping[str, Any]:
    """A chart's own ``values.yaml`` as a mapping (empty when it is none: the engine, which
    reads it too, reports what is wrong with it)."""
    documents, problems = parse_yaml(text.decode(errors="replace"), "values.yaml")
    data = documents[0].data if documents and not problems else None
    return data if isinstance(data, Mapping) else {}


def values_from_problem(document: Document, at: Pointer, path: str) -> Diagnostic | None:
    """C6: a ``valuesFrom`` path must be relative and stay inside the repo."""
    normal = posixpath.normpath(path) if path else path
    if path and not posixpath.isabs(path) and not normal.startswith(".."):
        return None
    message = (
        "valuesFrom must name a file inside the repo (a relative path that does not climb out)"
    )
    return document.diagnostic("C6", message, at)


def entry_values(
    inline: Mapping[str, Any] | None, from_file: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """A runtime entry's values: its ``valuesFrom`` file, then its ``values`` over it."""
    if inline is None and from_file is None:
        return None
    return merge_values(from_file or {}, inline or {})


def render_problems(
    repo: ConfigRepo, rendered: Mapping[tuple[str, str], RenderedTemplate]
) -> list[Diagnostic]:
    """What makes a chart's renders unusable, once per version and problem, naming the first
    runtime and how many more: hooks (C9, unless the module states ``hooks: Skip``); no
    operator (C2); an operator whose ``app.kubernetes.io/version`` label is not the folder's
    version (C4: L5 reads the running version from it, so every later sync would see another
    version than the one installed, held as a downgrade or upgraded every time)."""
    found: dict[tuple[str, str, str, str], list[str]] = {}
    judged: dict[tuple[str, str, int], list[tuple[str, str]]] = {}  # one render, many runtimes
    for (runtime, name), template in sorted(rendered.items()):
        version = _rendered_version(repo, runtime, name)
        key = (name, version, id(template))
        if key not in judged:
            judged[key] = list(_problems_of_render(repo.modules[name], version, template))
        for rule, text in judged[key]:
            found.setdefault((name, version, rule, text), []).append(runtime)
    problems = []
    for (name, version, rule, text), runtimes in found.items():
        source = repo.modules[name].versions[version].template
        root = source.root if source is not None else name
        more = f" and {len(runtimes) - 1} more" if len(runtimes) > 1 else ""
        message = f"chart of module {name} {version} {text} [runtime {runtimes[0]}{more}]"
        problems.append(Diagnostic(f"{root}/Chart.yaml", 1, 1, rule, message))
    return problems


def _problems_of_render(
    module: Module, version: str, template: RenderedTemplate
) -> Iterator[tuple[str, str]]:
    yield from _hook_problems(module, template)
    operators = [o for o in template.objects if _is_operator(o, module)]
    if not operators:
        yield (
            "C2",
            (
                f"renders no {module.operator_kind} '{module.operator_name}' (the module's "
                "operator, spec.operator of its module.yaml)"
            ),
        )
    for operator in operators:
        label = ((operator.get("metadata") or {}).get("labels") or {}).get(LABEL_APP_VERSION)
        running = parse_running_version(label)
        if label is not None and (running is None or running.compare(version) != 0):
            yield (
                "C4",
                (
                    f"renders its operator's {LABEL_APP_VERSION} label as '{label}', not the "
                    f"version of its folder, {version} (the running version is read from it: set "
                    "the chart's appVersion)"
                ),
            )


def _hook_problems(module: Module, template: RenderedTemplate) -> Iterator[tuple[str, str]]:
    """C9: hooks refused by ``spec.hooks: Refuse``; with ``Run``, what cannot be run as Helm
    runs it (a Helm 2 ``crd-install`` hook, an unknown phase or delete policy, a weight that is
    no integer)."""
    if not template.hooks or module.hooks is HookPolicy.SKIP:
        return
    if module.hooks is HookPolicy.REFUSE and not hooks_text(template):
        return  # test hooks only: never run, nothing to refuse
    if module.hooks is HookPolicy.REFUSE:
        yield (
            "C9",
            (
                f"has Helm hooks, refused by spec.hooks: Refuse: {hooks_text(template)}; "
                "switch them off by the chart's values, or state spec.hooks: Run or Skip in its "
                "module.yaml (docs/charts.md, Hooks)"
            ),
        )
        return
    for body in template.hooks:
        metadata = body.get("metadata") or {}
        for problem in hook_problems(body):
            yield (
                "C9",
                (
                    f"has a hook that cannot be run, {body.get('kind')}/{metadata.get('name')}: "
                    f"{problem} (docs/charts.md, Hooks)"
                ),
            )


def _is_operator(body: Mapping[str, Any], module: Module) -> bool:
    metadata = body.get("metadata") or {}
    kind, name = body.get("kind"), metadata.get("name")
    return bool(kind == module.operator_kind and name == module.operator_name)


def hooks_text(template: RenderedTemplate) -> str:
    """``Job/x (pre-install,pre-upgrade), ...``: the hooks of a render, sorted (``helm test``'s
    aside: never run)."""
    shown = []
    for body in template.hooks:
        if hook_of(body).phases <= TEST_PHASES:
            continue
        metadata = body.get("metadata") or {}
        hook = str((metadata.get("annotations") or {}).get(HOOK_ANNOTATION, "")).replace(" ", "")
        shown.append(f"{body.get('kind')}/{metadata.get('name')} ({hook})")
    return ", ".join(sorted(shown))


def _rendered_version(repo: ConfigRepo, runtime: str, module: str) -> str:
    """The version of ``module`` that ``runtime`` gets (the one rendered for it)."""
    resolution = resolve_runtime(repo, repo.runtimes[runtime])
    return next((m.version for m in resolution.modules if m.name == module), "?")
