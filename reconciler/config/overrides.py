"""Rule C8: every ``config`` override is checked against its module's CRD, before apply (pure).

A runtime's ``spec.modules[].config`` and a channel's ``spec.config.<module>`` are partial
``spec``s of the module's configuration CR (its ``default.yaml``). Each is checked against the
``openAPIV3Schema`` that the module version's manifest gives the CR's kind, at the version of
the CR's ``apiVersion`` (which must be served): unknown fields where the schema is closed
(``properties`` given, no ``x-kubernetes-preserve-unknown-fields``; the API server would
silently prune them, which is an error here), types, enums, patterns, ranges, lengths. A partial
spec need not carry required fields (the default configuration does). CEL rules
(``x-kubernetes-validations``) are not evaluated: a warning says the server checks them.

OpenAPI v3 as Kubernetes reads it is turned into JSON Schema once per module version
(:class:`OverrideChecker` keeps it, and compiles once a schema several versions share):
``nullable`` adds ``null``, ``x-kubernetes-int-or-string`` allows an integer or a string,
``format: int32/int64`` become ranges, other formats and the ``x-kubernetes-*`` list and map
markers are left to the server, and a pattern RE2 cannot read is left out (the server's Go
``regexp`` would refuse the CRD). Validation reuses the schema checker's two validators: a compiled
``fastjsonschema`` verdict, and ``jsonschema`` for the located errors of an override that fails,
both matching patterns by RE2, in linear time (:mod:`reconciler.config.patterns`).
Callers: the validator.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import fastjsonschema

from reconciler.config.budget import TimeBudget
from reconciler.config.patterns import linear_quick, readable, with_linear_patterns
from reconciler.config.schema import diagnostics_of, draft7_view, validator_class
from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic, Pointer
from reconciler.core.model import Module

RULE = "C8"
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
#: OpenAPI keywords that mean the same in JSON Schema and are kept as they are.
_KEPT = frozenset(
    {
        "type",
        "enum",
        "pattern",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "multipleOf",
    }
)
_SUBSCHEMA = ("items", "additionalProperties", "not")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf")


def to_json_schema(node: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema (draft-07 keywords) of a Kubernetes OpenAPI v3 schema ``node``, read as a
    partial object: ``required`` is left out."""
    out: dict[str, Any] = {k: v for k, v in node.items() if k in _KEPT}
    if "pattern" in out and not readable(str(out["pattern"])):
        del out["pattern"]
    if "properties" in node:
        out["properties"] = {k: to_json_schema(v) for k, v in node["properties"].items()}
    for key in _SUBSCHEMA:
        if isinstance(node.get(key), Mapping):
            out[key] = to_json_schema(node[key])
        elif isinstance(node.get(key), bool):
            out[key] = node[key]
    for key in _SUBSCHEMA_LISTS:
        if isinstance(node.get(key), list):
            out[key] = [to_json_schema(branch) for branch in node[key]]
    _kubernetes_extensions(node, out)
    return out


def _kubernetes_extensions(node: Mapping[str, Any], out: dict[str, Any]) -> None:
    open_object = node.get("x-kubernetes-preserve-unknown-fields") is True
    if node.get("x-kubernetes-embedded-resource") is True and "properties" in out:
        for name, kind in (("apiVersion", "string"), ("kind", "string"), ("metadata", "object")):
            out["properties"].setdefault(name, {"type": kind})
    if "properties" in out and "additionalProperties" not in out and not open_object:
        out["additionalProperties"] = False
    if node.get("x-kubernetes-int-or-string") is True:
        out["type"] = ["integer", "string"]
    bounds = _INT_RANGES.get(str(node.get("format")))
    if bounds is not None and node.get("type") == "integer":
        out.setdefault("minimum", bounds[0])
        out.setdefault("maximum", bounds[1])
    if node.get("nullable") is True:
        kinds = out.get("type")
        if isinstance(kinds, str):
            out["type"] = [kinds, "null"]
        elif isinstance(kinds, list):
            out["type"] = [*kinds, "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]


def server_rules(node: Mapping[str, Any], value: Any) -> int:
    """How many CEL rules (``x-kubernetes-validations``) of ``node`` and the schemas below it
    bear on ``value``: the server checks them, we do not."""
    count = len(node.get("x-kubernetes-validations") or ())
    if isinstance(value, Mapping):
        properties = node.get("properties") or {}
        extra = node.get("additionalProperties")
        for key, child in value.items():
            schema = properties.get(key, extra if isinstance(extra, Mapping) else None)
            if schema is not None:
                count += server_rules(schema, child)
    elif isinstance(value, list) and isinstance(node.get("items"), Mapping):
        count += sum(server_rules(node["items"], item) for item in value)
    return count


@dataclass(slots=True)
class CompiledSchema:
    """A converted schema with both validators, compiled on first use; shared by the module
    versions whose schemas are the same (most versions do not change their CRD)."""

    schema: Mapping[str, Any]
    _quick: Callable[[Any], Any] | None = None
    _full: Any = None

    def valid(self, value: Any) -> bool:
        """The verdict on ``value`` from the compiled validator."""
        if self._quick is None:
            quick = fastjsonschema.compile(draft7_view(self.schema), use_default=False)
            self._quick = linear_quick(quick, self.schema)
        try:
            self._quick(value)
        except fastjsonschema.JsonSchemaException:
            return False
        return True

    def errors(self, value: Any, at: Pointer) -> list[Any]:
        """Every ``jsonschema`` error of ``value``, its path starting at ``at``."""
        if self._full is None:
            self._full = with_linear_patterns(validator_class())(dict(self.schema))
        found = list(self._full.iter_errors(value))
        for error in found:
            error.path.extendleft(reversed(at))
        return found


@dataclass(frozen=True, slots=True)
class SpecSchema:
    """The schema of a configuration CR's ``spec`` in one module version."""

    kind: str
    api_version: str
    module: str
    version: str
    openapi: Mapping[str, Any]
    compiled: CompiledSchema

    @property
    def subject(self) -> str:
        """``Serverless operator.kyma-project.io/v1alpha1 of module serverless 1.2.0``."""
        return f"{self.kind} {self.api_version} of module {self.module} {self.version}"


@dataclass(frozen=True, slots=True)
class OverrideFindings:
    """What checking one override found: errors (C8) and warnings (C8, server-side rules)."""

    errors: tuple[Diagnostic, ...] = ()
    warnings: tuple[Diagnostic, ...] = ()


@dataclass(slots=True)
class OverrideChecker:
    """Checks overrides; the schema of each module version is converted and compiled once."""

    _targets: dict[tuple[str, str], SpecSchema | str] = field(default_factory=dict)
    _compiled: dict[str, CompiledSchema] = field(default_factory=dict)

    def check(
        self,
        document: Document,
        at: Pointer,
        config: Mapping[str, Any],
        target: tuple[Module, str],
        budget: TimeBudget | None = None,
    ) -> OverrideFindings:
        """The findings of ``config`` (at ``at`` in ``document``) for ``target``, a module and
        the version it is used with."""
        spec = self.spec_schema(*target)
        if isinstance(spec, str):
            return OverrideFindings((document.diagnostic(RULE, spec, at),))
        warnings: tuple[Diagnostic, ...] = ()
        rules = server_rules(spec.openapi, config)
        if rules:
            message = (
                f"{rules} CEL rule(s) (x-kubernetes-validations) of {spec.subject} bear on this "
                "config: they are checked by the API server, not here"
            )
            warnings = (document.diagnostic(RULE, message, at),)
        value = _without_nulls(config)
        if spec.compiled.valid(value):
            return OverrideFindings((), warnings)
        found = diagnostics_of(spec.compiled.errors(value, at), document, budget)
        return OverrideFindings(tuple(_located(d, spec) for d in found), warnings)

    def spec_schema(self, module: Module, version: str) -> SpecSchema | str:
        """The schema of ``module``'s configuration ``spec`` at ``version``, or why none."""
        key = (module.name, version)
        known = self._targets.get(key)
        if known is None:
            known = self._targets[key] = _spec_schema(module, version, self._compile)
        return known

    def _compile(self, openapi: Mapping[str, Any]) -> CompiledSchema:
        schema = to_json_schema(openapi)
        key = json.dumps(schema, sort_keys=True)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = CompiledSchema(schema)
        return compiled


def _located(diagnostic: Diagnostic, spec: SpecSchema) -> Diagnostic:
    message = diagnostic.message
    if message.startswith("unknown field"):
        note = f"not in the schema of {spec.subject}: the API server would silently prune it"
    else:
        note = f"the schema of {spec.subject}"
    return replace(diagnostic, rule=RULE, message=f"{message} ({note})")


def _without_nulls(value: Any) -> Any:
    """``null`` releases a field (a merge patch's removal): not a value to check."""
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def _spec_schema(
    module: Module, version: str, compile_schema: Callable[[Mapping[str, Any]], CompiledSchema]
) -> SpecSchema | str:
    content = module.versions.get(version)
    default = content.default_configuration if content is not None else None
    if content is None or default is None:
        return (
            f"module '{module.name}' {version} has no default configuration (default.yaml): "
            "there is no configuration CR for config to apply to"
        )
    api_version, kind = str(default.get("apiVersion", "")), str(default.get("kind", ""))
    group, _, served = api_version.rpartition("/")
    crd = next((o for o in content.objects if _defines(o, group, kind)), None)
    if crd is None:
        return (
            f"the manifest of module '{module.name}' {version} defines no "
            f"CustomResourceDefinition for {kind} ({group or 'core'}), the kind of its default "
            "configuration: config cannot be checked"
        )
    entry = next(
        (v for v in crd["spec"]["versions"] if v.get("name") == served and v.get("served")), None
    )
    if entry is None:
        return (
            f"the CustomResourceDefinition of {kind} in module '{module.name}' {version} serves "
            f"no version {served} (the default configuration's apiVersion)"
        )
    root = (entry.get("schema") or {}).get("openAPIV3Schema") or {}
    openapi = (root.get("properties") or {}).get("spec") or {}
    return SpecSchema(kind, api_version, module.name, version, openapi, compile_schema(openapi))


def _defines(obj: Mapping[str, Any], group: str, kind: str) -> bool:
    if obj.get("kind") != "CustomResourceDefinition":
        return False
    spec = obj.get("spec") or {}
    return bool(spec.get("group") == group and (spec.get("names") or {}).get("kind") == kind)
