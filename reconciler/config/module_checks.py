"""The checks of modules in one validation pass (pure): the module folders (C2, C4), their
version folders and what each holds (manifest objects, a default configuration, a chart, overlay
or source), the operator a module names (C2) and the dependencies between modules (C5). Callers:
``config.validate``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.config.builders import health_checks_from, module_from
from reconciler.config.credentials import find_inline_credentials
from reconciler.config.document_checks import DocumentChecks
from reconciler.config.file_credentials import Scan, credential_scans
from reconciler.config.manifests import operator_version_problems
from reconciler.config.overlays import overlay_problems
from reconciler.config.raw import RawFile, RawModule, RawTemplate, RawVersion
from reconciler.config.schema_refs import schema_reference_problems
from reconciler.config.sources import source_problems
from reconciler.config.templates import (
    declared_kind_problem,
    template_source,
    values_mapping,
    version_kind,
)
from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic, Pointer, did_you_mean
from reconciler.core.health import Identity, check_matches
from reconciler.core.model import (
    LABEL_APP_VERSION,
    HealthCheck,
    Module,
    ModuleKind,
    ModuleVersion,
)
from reconciler.core.preflight import RECREATE_ANNOTATION, asks_recreate
from reconciler.core.versions import is_version


@dataclass(slots=True)
class ModuleChecks:
    """The module checks of one pass; what they find goes to ``docs``."""

    docs: DocumentChecks

    def module(self, raw: RawModule) -> Module:
        """The typed module of a folder (a placeholder when module.yaml is missing or broken)."""
        versions = {v.name: self.version(v) for v in raw.versions if self.version_name_ok(v)}
        if raw.module is None:
            self.docs.diagnostics.append(
                Diagnostic(
                    raw.path + "/module.yaml", 1, 1, "C2", "module folder has no module.yaml"
                )
            )
            return _placeholder_module(raw.name, versions)
        document = self.docs.single(raw.module, "Module")
        if document is None:  # still in the cross-file checks with the fields that are valid
            return _placeholder_module(raw.name, versions, _valid_dependencies(raw.module))
        if not self.docs.name_matches(document, raw.name, "module folder name"):
            return _placeholder_module(raw.name, versions)
        module = module_from(document.data, versions, raw.module.path)
        self.module_versions_metadata(document, versions)
        self.operators(module, raw, document)
        return module

    def version_name_ok(self, raw: RawVersion) -> bool:
        if is_version(raw.name):
            return True
        message = f"version folder '{raw.name}' is not a semantic version (e.g. 1.2.3)"
        self.docs.diagnostics.append(Diagnostic(raw.path, 1, 1, "C4", message))
        return False

    def version(self, raw: RawVersion) -> ModuleVersion:
        """A version folder: its objects and default configuration, or its templated files."""
        kind, problem = version_kind(raw)
        if kind is None or problem is not None:
            self.docs.diagnostics.extend([problem] if problem is not None else [])
            return ModuleVersion(raw.name, ())
        if kind is ModuleKind.SOURCE and self.source(raw.source) is None:
            return ModuleVersion(raw.name, ())  # reported
        if kind.templated:
            return self.templated_version(raw, kind)
        assert raw.manifest is not None
        objects = [d.data for d in raw.manifest.documents if self.docs.kubernetes_object(d)]
        if not raw.manifest.broken and not raw.manifest.documents:
            self.docs.diagnostics.append(raw.manifest.at("C1", "manifest has no objects"))
        default = self.default_configuration(raw.default)
        return ModuleVersion(raw.name, tuple(objects), default)

    def templated_version(self, raw: RawVersion, kind: ModuleKind) -> ModuleVersion:
        """A chart, overlay or source version: its files and ``values.yaml``, checked for
        credentials (C6); its objects are rendered per runtime after resolution."""
        values, problems = values_mapping(raw.values, "values.yaml")
        self.docs.diagnostics.extend(problems)
        if values is not None:
            self.docs.diagnostics.extend(find_inline_credentials(values, self.docs.budget))
            self.docs.value_documents[values.path] = values
        if raw.template is not None:
            self.template_files(raw.template, kind)
        default = self.default_configuration(raw.default)
        template = template_source(raw, kind, values)
        return ModuleVersion(raw.name, (), default, kind=kind, template=template)

    def template_files(self, template: RawTemplate, kind: ModuleKind) -> None:
        """C6, what a renderer would read from its files: every file of a chart or an overlay
        scanned for credentials as a manifest is (each within its time budget), the files an
        overlay names and the documents a chart's schemas refer to, which must be its own."""
        chart = kind is ModuleKind.CHART
        for document, scan in credential_scans(template.files, template.root, chart=chart):
            self.docs.timed(document, functools.partial(self.scanned, scan))
        if kind is ModuleKind.KUSTOMIZE:
            self.docs.diagnostics.extend(overlay_problems(template.files, template.root))
        if chart:
            self.docs.diagnostics.extend(schema_reference_problems(template.files, template.root))

    def scanned(self, scan: Scan) -> bool:
        """Whether ``scan`` found nothing (what it found is reported)."""
        found = scan(self.docs.budget)
        self.docs.diagnostics.extend(found)
        return not found

    def source(self, file: RawFile | None) -> Document | None:
        """The checked document of a ``source.yaml`` (schema, C6, :func:`source_problems`)."""
        document = self.docs.single(file, "Source") if file is not None else None
        problems = source_problems(document) if document is not None else []
        self.docs.diagnostics.extend(problems)
        return None if problems else document

    def default_configuration(self, file: RawFile | None) -> Mapping[str, Any] | None:
        if file is None or file.broken:
            return None
        if len(file.documents) != 1:
            at = file.documents[1] if len(file.documents) > 1 else None
            message = f"default configuration must be one document, found {len(file.documents)}"
            self.docs.diagnostics.append(
                at.diagnostic("C1", message, ()) if at else file.at("C1", message)
            )
            return None
        document = file.documents[0]
        data = document.data
        if not self.docs.kubernetes_object(document) or not isinstance(data, Mapping):
            return None
        if asks_recreate(data):
            message = (
                f"the default configuration is never recreated (created once, L3): drop "
                f"{RECREATE_ANNOTATION}"
            )
            pointer = ("metadata", "annotations", RECREATE_ANNOTATION)
            self.docs.diagnostics.append(document.diagnostic("C1", message, pointer))
            return None
        return data

    def module_versions_metadata(self, document: Document, versions: Mapping[str, Any]) -> None:
        declared = document.data["spec"].get("versions", {})
        for version, metadata in declared.items():
            if version not in versions:
                message = f"version {version} has no folder" + did_you_mean(version, versions)
                pointer: Pointer = ("spec", "versions", version)
                self.docs.diagnostics.append(document.diagnostic("C4", message, pointer, key=True))
            elif "kind" in metadata and (versions[version].objects or versions[version].template):
                problem = declared_kind_problem(
                    document, version, metadata["kind"], versions[version].kind
                )
                self.docs.diagnostics.extend([problem] if problem is not None else [])
            if version in versions and metadata.get("healthChecks"):
                self.health_checks(document, version, versions[version])

    def health_checks(self, document: Document, version: str, content: ModuleVersion) -> None:
        """Each of a manifest version's ``healthChecks`` names exactly one object of its
        manifest or its default configuration (a templated version's objects are rendered
        per runtime: a check that names none there fails the module at its sync)."""
        if content.kind.templated or not content.objects:
            return
        namespace = str(document.data["spec"]["namespace"])
        bodies = [*content.objects, *filter(None, [content.default_configuration])]
        identities = [_identity(body, namespace) for body in bodies]
        declared = document.data["spec"]["versions"][version]["healthChecks"]
        for index, check in enumerate(health_checks_from(declared)):
            found = check_matches(check, identities)
            if len(found) == 1:
                continue
            pointer: Pointer = ("spec", "versions", version, "healthChecks", index)
            message = _health_check_problem(check, version, found, identities)
            self.docs.diagnostics.append(document.diagnostic("C2", message, pointer))

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
                self.docs.diagnostics.extend(
                    operator_version_problems(found, LABEL_APP_VERSION, name)
                )
            if not operator:
                message = (
                    f"the manifest of version {name} has no {module.operator_kind} "
                    f"'{module.operator_name}' (the module's operator)"
                )
                pointer: Pointer = ("spec", "operator", "name")
                self.docs.diagnostics.append(document.diagnostic("C2", message, pointer))

    def dependencies(self, modules: Mapping[str, Module], raw: Mapping[str, RawModule]) -> None:
        """C5: every ``dependsOn`` names a module, and no dependencies form a cycle."""
        for name, module in sorted(modules.items()):
            document = _module_document(raw[name])
            for index, dep in enumerate(module.depends_on):
                if dep not in modules:
                    message = f"dependsOn names module '{dep}', which does not exist" + (
                        did_you_mean(dep, modules)
                    )
                    pointer: Pointer = ("spec", "dependsOn", index)
                    self.docs.diagnostics.append(_diag(document, raw[name], "C5", message, pointer))
        for cycle in _cycles(modules):
            first = cycle[0]
            index = modules[first].depends_on.index(cycle[1])
            message = "dependency cycle: " + " -> ".join((*cycle, first))
            pointer = ("spec", "dependsOn", index)
            self.docs.diagnostics.append(
                _diag(_module_document(raw[first]), raw[first], "C5", message, pointer)
            )


def _is_operator(obj: Mapping[str, Any], module: Module) -> bool:
    return (
        obj.get("kind") == module.operator_kind
        and str(obj.get("apiVersion", "")).startswith("apps/")
        and obj.get("metadata", {}).get("name") == module.operator_name
    )


def _identity(body: Mapping[str, Any], namespace: str) -> Identity:
    """An object of a manifest as a health check names it (in the module's namespace when
    it names none)."""
    metadata = body.get("metadata") or {}
    group = str(body.get("apiVersion") or "").rpartition("/")[0]
    where = str(metadata.get("namespace") or namespace)
    return group, str(body.get("kind")), where, str(metadata.get("name"))


def _health_check_problem(
    check: HealthCheck, version: str, found: Sequence[Identity], identities: Sequence[Identity]
) -> str:
    """Why ``check`` does not name exactly one object of ``version`` (``found``)."""
    if found:
        subjects = ", ".join("/".join(p for p in (k, ns, n) if p) for _, k, ns, n in found)
        return (
            f"health check {check.subject} names {len(found)} objects of version {version} "
            f"({subjects}): give its namespace or group"
        )
    names = [name for _, kind, _, name in identities if kind == check.kind]
    hint = did_you_mean(check.name, names) if names else ""
    return (
        f"health check {check.subject} names no object of version {version} (its manifest "
        f"or default configuration)" + hint
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
