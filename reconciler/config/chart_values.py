"""Rule C9 for values: a chart's ``values.schema.json`` checks each runtime's merged values (pure).

Helm checks the merged values of a release against the chart's ``values.schema.json`` when it
renders, and names neither the file nor the line that set a bad value. ``validate`` checks them
first, for every runtime that takes the chart, with the same merge (the chart's ``values.yaml``
< the version's ``values.yaml`` < the channel's ``spec.values.<module>`` < the runtime entry's
``valuesFrom`` file < its ``values``; a ``null`` removes a default, as in Helm) and reports each
error at the strongest layer that set the value: its file, line and pointer. One bad value of a
channel or a version is one error, naming the first runtime and how many more; every error of
the repo comes in the same run. The check of one chart and one set of merged values runs once.
Callers: the validator (``config.validate``), before anything is rendered.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from reconciler.config.patterns import linear_quick, with_linear_patterns
from reconciler.config.schema_refs import SCHEMA_FILE, schema_reference_problems
from reconciler.config.yamlsafe import Document, parse_yaml
from reconciler.core.diagnostics import Diagnostic, Pointer, did_you_mean
from reconciler.core.model import ConfigRepo, ModuleKind, ModuleVersion, Runtime, TemplateSource
from reconciler.core.overrides import module_channel
from reconciler.core.resolve import RESOLUTIONS, resolve_runtime
from reconciler.core.templates import merge_values, runtime_values, values_hash

if TYPE_CHECKING:  # jsonschema is imported only when a chart ships a schema (startup time)
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

#: (path, line, column, message) -> a diagnostic and the runtimes it was found for.
_Findings = dict[tuple[str, int, int, str], tuple[Diagnostic, list[str]]]
RULE = "C9"


@dataclass(frozen=True, slots=True)
class Layer:
    """One layer of values as written: its document and where the values sit in it."""

    document: Document
    base: Pointer

    @property
    def data(self) -> Any:
        """The values of the layer (``None`` when the document has none there)."""
        return _walk(self.document.data, self.base)[1]


@dataclass(frozen=True, slots=True)
class ValuesDocuments:
    """The documents values are written in, as the validator read them."""

    runtimes: Mapping[str, Document]
    channels: Mapping[str, Document]
    #: Version ``values.yaml`` files and ``valuesFrom`` files, by their repo path.
    files: Mapping[str, Document]


@dataclass(frozen=True, slots=True)
class _Problem:
    """One schema error: the path into the values and what is wrong there."""

    path: tuple[str | int, ...]
    message: str


@dataclass(slots=True)
class ChartValuesChecker:
    """Checks merged values against the charts' schemas; remembers each check by content."""

    documents: ValuesDocuments
    _schemas: dict[str, ChartSchema | Diagnostic | None] = field(default_factory=dict)
    _defaults: dict[str, Document | None] = field(default_factory=dict)
    _checked: dict[tuple[str, str], tuple[_Problem, ...] | Diagnostic] = field(default_factory=dict)
    #: (path, line, column, message) -> the diagnostic and the runtimes it was found for.
    _found: _Findings = field(default_factory=dict)
    _unused: _Findings = field(default_factory=dict)

    def problems(self, repo: ConfigRepo, runtimes: Mapping[str, Runtime]) -> list[Diagnostic]:
        """Every C9 values error of ``runtimes`` (each named once, with its runtimes)."""
        everyone = _has_charts(repo) or any(c.values for c in repo.channels.values())
        for runtime in runtimes.values():
            if everyone or _gives_values(runtime):  # else no chart to check, no value to note
                self.check_runtime(repo, runtime)
        return _named_runtimes(self._found)

    def unused(self) -> list[Diagnostic]:
        """C9 warnings: values given to a module whose version takes none (a manifest), each
        named once, with its runtimes (after :meth:`problems`)."""
        return _named_runtimes(self._unused)

    def note_unused(
        self, repo: ConfigRepo, runtime: Runtime, module: str, version: str, kind: ModuleKind
    ) -> None:
        """Values of ``runtime``'s entry or channel for a version that takes none: a plain
        manifest or a Kustomize overlay."""
        index = next((i for i, m in enumerate(runtime.modules) if m.name == module), None)
        given: list[tuple[Document, Pointer, bool]] = []
        document = self.documents.runtimes.get(runtime.name)
        if index is not None and document is not None:
            ref = runtime.modules[index]
            for name, value in (("values", ref.values), ("valuesFrom", ref.values_from)):
                if value is not None:
                    given.append((document, ("spec", "modules", index, name), False))
        channel_name = module_channel(runtime, module)
        channel = repo.channels.get(channel_name)
        channel_document = self.documents.channels.get(channel_name)
        if channel is not None and channel.values.get(module) and channel_document is not None:
            given.append((channel_document, ("spec", "values", module), True))
        if not given:  # the common case: nothing to say, nothing built
            return
        what = "a Kustomize overlay" if kind is ModuleKind.KUSTOMIZE else "a manifest"
        message = f"{module} {version} is {what}, not a chart: these values are not used"
        for where, at, key in given:
            self._add(where.diagnostic(RULE, message, at, key=key), runtime.name, self._unused)

    def check_runtime(self, repo: ConfigRepo, runtime: Runtime) -> None:
        """Check the values of every chart with a schema that ``runtime`` gets."""
        valued = _valued_modules(repo, runtime)
        for resolved in resolve_runtime(repo, runtime).modules:
            content = repo.modules[resolved.name].versions[resolved.version]
            if content.kind in (ModuleKind.MANIFEST, ModuleKind.KUSTOMIZE):
                if resolved.name in valued:
                    self.note_unused(repo, runtime, resolved.name, resolved.version, content.kind)
            elif content.kind is ModuleKind.CHART and content.template is not None:
                self.check_chart(repo, runtime, resolved.name, content)

    def check_chart(
        self, repo: ConfigRepo, runtime: Runtime, module: str, content: ModuleVersion
    ) -> None:
        """Check ``runtime``'s merged values of ``module``'s chart version ``content``."""
        template = content.template
        assert template is not None
        schema = self.schema(template)
        if isinstance(schema, Diagnostic):
            self._add(schema, runtime.name)
        if schema is None or isinstance(schema, Diagnostic):
            return
        channel = repo.channels.get(module_channel(runtime, module))
        values = runtime_values(runtime, module, content, channel)
        key = (template.digest, values_hash(values))
        if key not in self._checked:
            self._checked[key] = self.schema_problems(template, schema, values)
        found = self._checked[key]
        if isinstance(found, Diagnostic):  # the schema itself is broken
            self._add(found, runtime.name)
            return
        label = f"{module} {content.version}"
        for problem in found:
            layers = self.layers(runtime, module, template)
            self._add(_located(problem, layers, label, template), runtime.name)

    def schema(self, template: TemplateSource) -> ChartSchema | Diagnostic | None:
        """The validator of the chart's ``values.schema.json``, a C9 error when it cannot be
        read, or ``None`` when the chart ships none."""
        if template.digest not in self._schemas:
            self._schemas[template.digest] = _chart_schema(template)
        return self._schemas[template.digest]

    def defaults(self, template: TemplateSource) -> Document | None:
        """The chart's own ``values.yaml``, read with positions."""
        if template.digest not in self._defaults:
            text = template.files.get("values.yaml", b"").decode()
            documents, _ = parse_yaml(text, f"{template.root}/values.yaml")
            found = documents[0] if documents else None
            self._defaults[template.digest] = found if found and _is_map(found.data) else None
        return self._defaults[template.digest]

    def schema_problems(
        self, template: TemplateSource, schema: ChartSchema, values: Mapping[str, Any]
    ) -> tuple[_Problem, ...] | Diagnostic:
        """The schema's errors for ``values`` over the chart's defaults, as Helm merges them
        (or the schema's own problem)."""
        defaults = self.defaults(template)
        merged = merge_values(defaults.data if defaults is not None else {}, values)
        instance = json.loads(json.dumps(_without_nulls(merged), default=str))
        errors = schema.errors(instance)
        if isinstance(errors, Diagnostic):
            return errors
        return tuple(p for error in errors for p in _problems_of(error))

    def layers(self, runtime: Runtime, module: str, template: TemplateSource) -> list[Layer]:
        """The layers that may set a value of ``module`` on ``runtime``, strongest first."""
        docs = self.documents
        found: list[Layer] = []
        index = next((i for i, m in enumerate(runtime.modules) if m.name == module), None)
        document = docs.runtimes.get(runtime.name)
        if index is not None and document is not None:
            found.append(Layer(document, ("spec", "modules", index, "values")))
            values_from = runtime.modules[index].values_from
            if values_from is not None and values_from in docs.files:
                found.append(Layer(docs.files[values_from], ()))
        channel = docs.channels.get(module_channel(runtime, module))
        if channel is not None:
            found.append(Layer(channel, ("spec", "values", module)))
        if template.values_path in docs.files:
            found.append(Layer(docs.files[template.values_path], ()))
        defaults = self.defaults(template)
        if defaults is not None:
            found.append(Layer(defaults, ()))
        return found

    def _add(self, diagnostic: Diagnostic, runtime: str, into: _Findings | None = None) -> None:
        key = (diagnostic.path, diagnostic.line, diagnostic.column, diagnostic.message)
        found = self._found if into is None else into
        found.setdefault(key, (diagnostic, []))[1].append(runtime)


def _named_runtimes(findings: _Findings) -> list[Diagnostic]:
    """Each finding once, naming its first runtime and how many more."""
    named = []
    for diagnostic, names in findings.values():
        more = f" and {len(names) - 1} more" if len(names) > 1 else ""
        named.append(
            replace(diagnostic, message=f"{diagnostic.message} [runtime {names[0]}{more}]")
        )
    return named


def check_chart_values(
    repo: ConfigRepo, runtimes: Mapping[str, Runtime | None], documents: ValuesDocuments
) -> tuple[list[Diagnostic], list[Diagnostic]]:
    """The C9 errors and warnings of the valid ``runtimes``' values (``repo``'s modules and
    channels; its runtimes are not read)."""
    valid = {name: r for name, r in runtimes.items() if r is not None}
    checker = ChartValuesChecker(documents)
    with_runtimes = replace(repo, runtimes=valid)
    RESOLUTIONS.share(repo, with_runtimes)  # the same modules and channels: resolved already
    errors = checker.problems(with_runtimes, valid)
    return errors, checker.unused()


@dataclass(slots=True)
class ChartSchema:
    """A chart's ``values.schema.json``: "valid?" answered by a schema compiled with
    ``fastjsonschema`` (as for our own schemas, ``config.schema``); ``jsonschema`` (draft 7
    unless the schema names another, as Helm assumes) only lists the errors of values that
    fail it, so a repo whose values are all valid never imports it."""

    where: str
    schema: Mapping[str, Any]
    _quick: Callable[[Any], Any] | None = None
    _compiled: bool = False
    _full: Validator | Diagnostic | None = None

    def errors(self, instance: Any) -> list[ValidationError] | Diagnostic:
        """Every error of ``instance`` (none when valid), or what is wrong with the schema."""
        if self.quick_valid(instance):
            return []
        full = self.full()
        if isinstance(full, Diagnostic):
            return full
        return sorted(full.iter_errors(instance), key=lambda e: [str(p) for p in e.path])

    def quick_valid(self, instance: Any) -> bool:
        import fastjsonschema

        if not self._compiled:
            self._compiled = True
            try:  # use_default=False: never write defaults into the values
                quick = fastjsonschema.compile(dict(self.schema), use_default=False)
                self._quick = linear_quick(quick, self.schema)
            except Exception:
                self._quick = None
        if self._quick is None:
            return False
        try:
            self._quick(instance)
        except fastjsonschema.JsonSchemaException:
            return False
        return True

    def full(self) -> Validator | Diagnostic:
        """The full validator, or a C9 error when the schema is not valid JSON Schema."""
        if self._full is None:
            import jsonschema

            schema = dict(self.schema)
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
            try:
                cls.check_schema(schema)
                self._full = with_linear_patterns(cls)(schema)
            except jsonschema.SchemaError as error:
                problem = _first_line(error)
                message = f"the chart's {SCHEMA_FILE} is not a valid JSON Schema: {problem}"
                self._full = Diagnostic(self.where, 1, 1, RULE, message)
        return self._full


def _chart_schema(template: TemplateSource) -> ChartSchema | Diagnostic | None:
    data = template.files.get(SCHEMA_FILE)
    if data is None:
        return None
    where = f"{template.root}/{SCHEMA_FILE}"
    try:
        schema = json.loads(data)
    except ValueError as error:
        message = f"the chart's {SCHEMA_FILE} is not valid JSON: {_first_line(error)}"
        return Diagnostic(where, 1, 1, RULE, message)
    if not isinstance(schema, Mapping):
        return Diagnostic(where, 1, 1, RULE, f"the chart's {SCHEMA_FILE} is not a JSON object")
    if schema_reference_problems({SCHEMA_FILE: data}, template.root):
        return None  # never compiled (it would fetch): the module checks report it (C6)
    return ChartSchema(where, schema)


def _problems_of(error: ValidationError) -> Iterator[_Problem]:
    """One problem per offending value: an unexpected key is its own place."""
    path = tuple(error.absolute_path)
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    simple = error.validator == "additionalProperties" and not schema.get("patternProperties")
    if simple and isinstance(error.instance, Mapping):
        known = set(schema.get("properties", {}))
        for key in (k for k in error.instance if k not in known):
            hint = did_you_mean(str(key), known)
            yield _Problem((*path, key), f"the chart has no value '{key}'{hint}")
        return
    yield _Problem(path, error.message)


def _located(
    problem: _Problem, layers: list[Layer], label: str, template: TemplateSource
) -> Diagnostic:
    """``problem`` at the strongest layer that set its value (or the nearest enclosing one)."""
    shown = ".".join(str(p) for p in problem.path) or "(the values)"
    message = f"{label} values: {shown}: {problem.message} (the chart's {SCHEMA_FILE})"
    for depth in range(len(problem.path), -1, -1):
        prefix = problem.path[:depth]
        for layer in layers:
            if _has(layer.data, prefix):
                key = depth == len(problem.path) and depth > 0
                return layer.document.diagnostic(RULE, message, (*layer.base, *prefix), key=key)
    return Diagnostic(f"{template.root}/{SCHEMA_FILE}", 1, 1, RULE, message)


def _has(data: Any, path: Pointer) -> bool:
    return _walk(data, path)[0]


def _walk(data: Any, path: Pointer) -> tuple[bool, Any]:
    """Whether ``path`` is set in ``data``, and the value there."""
    node = data
    for part in path:
        if not _contains(node, part):
            return False, None
        node = node[part]
    return node is not None or bool(path), node


def _contains(node: Any, part: str | int) -> bool:
    if isinstance(node, Mapping):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


def _without_nulls(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with keys set to ``null`` removed (Helm: ``null`` deletes a default)."""
    return {
        k: _without_nulls(v) if isinstance(v, Mapping) else v
        for k, v in values.items()
        if v is not None
    }


def _is_map(data: Any) -> bool:
    return isinstance(data, Mapping)


def _first_line(error: Exception) -> str:
    text = getattr(error, "message", None) or str(error)
    return " ".join(str(text).split())[:200]


def _has_charts(repo: ConfigRepo) -> bool:
    """Whether any version of ``repo`` is a chart (whose values may need checking)."""
    return any(
        version.kind is ModuleKind.CHART
        for module in repo.modules.values()
        for version in module.versions.values()
    )


def _valued_modules(repo: ConfigRepo, runtime: Runtime) -> set[str]:
    """The modules given values for ``runtime``: by its entries, or by a channel (any: an
    entry may take its module from another channel than the runtime's)."""
    named = {r.name for r in runtime.modules if r.values is not None or r.values_from is not None}
    return named.union(*(c.values for c in repo.channels.values() if c.values))


def _gives_values(runtime: Runtime) -> bool:
    """Whether an entry of ``runtime`` gives values (``values`` or ``valuesFrom``)."""
    return any(r.values is not None or r.values_from is not None for r in runtime.modules)
