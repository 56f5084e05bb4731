"""Configuration overrides (``config`` on a runtime's module entry and per module in a channel):
how they merge, how ``render`` shows them, and rule C8 (each checked against the CRD schema of
the module version it is used with, every mistake at its file and line, in one run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.config.overrides import CompiledSchema, server_rules, to_json_schema
from reconciler.core.model import ClusterAccess, ModuleRef, Runtime
from reconciler.core.overrides import merge_config, resolve_override
from reconciler.core.resolve import Inclusion, ResolvedModule, VersionSource
from reconciler.source.loader import load_repo
from tests.support.repos import write_files
from tests.support.tools import require_shared

REPO = Path(__file__).resolve().parents[2]
API = "reconciler.dev/v1alpha1"


def _dump(kind: str, name: str, spec: dict[str, Any]) -> str:
    document = {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}
    return yaml.safe_dump(document, sort_keys=False)


# -- merging ---------------------------------------------------------------------------------


def test_the_runtime_wins_lists_are_replaced_whole_and_null_releases_a_field() -> None:
    channel = {"log": {"level": "info", "format": "json"}, "args": ["a", "b"], "replicas": 2}
    runtime = {"log": {"level": "debug"}, "args": ["c"], "replicas": None}
    assert merge_config(channel, runtime) == {
        "log": {"level": "debug", "format": "json"},
        "args": ["c"],
    }


def test_each_enforced_field_names_its_source() -> None:
    ref = ModuleRef("serverless", config={"log": {"level": "debug"}, "tracing": None})
    runtime = Runtime("edge", "regular", ClusterAccess(in_cluster=True), (ref,))
    resolved = ResolvedModule(
        "serverless", "1.2.0", VersionSource.RUNTIME_CHANNEL, "regular", Inclusion.LISTED
    )
    channel = {"serverless": {"log": {"format": "json"}, "tracing": {"on": True}}}
    override = resolve_override(runtime, resolved, channel)
    assert override is not None
    assert override.spec == {"log": {"format": "json", "level": "debug"}}
    assert [(f.dotted, f.source) for f in override.fields] == [
        ("spec.log.format", "channel regular"),
        ("spec.log.level", "runtime edge"),
    ]


def test_render_shows_the_merged_configuration_and_who_enforces_each_field() -> None:
    args = ["render", str(REPO / "sample-repo"), "--runtime", "prod-us-1", "--module", "serverless"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    default = result.output.split("---\n")[-1]
    assert default.startswith(
        "# enforced by channel regular: spec.defaultBuildJobPreset\n"
        "# enforced by runtime prod-us-1: spec.logLevel\n"
    )
    spec = yaml.safe_load(default)["spec"]
    assert spec["defaultBuildJobPreset"] == "fast"  # the channel's, over default.yaml's normal
    assert spec["logLevel"] == "debug"  # the runtime's
    assert spec["defaultRuntimePodPreset"] == "S"  # default.yaml's, not enforced


# -- converting a Kubernetes OpenAPI schema ---------------------------------------------------


def test_kubernetes_schema_specifics_become_json_schema() -> None:
    node = {
        "type": "object",
        "required": ["a"],
        "properties": {
            "port": {"x-kubernetes-int-or-string": True},
            "limit": {"type": "integer", "format": "int32", "nullable": True},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "odd": {"type": "string", "pattern": "(?i:go-only)\\z"},
            "perl": {"type": "string", "pattern": "^(?!admin)"},
        },
    }
    schema = to_json_schema(node)
    assert "required" not in schema  # a partial spec
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["port"] == {"type": ["integer", "string"]}
    assert props["limit"] == {
        "type": ["integer", "null"],
        "minimum": -(2**31),
        "maximum": 2**31 - 1,
    }
    assert "additionalProperties" not in props["free"]
    assert props["odd"]["pattern"] == "(?i:go-only)\\z"  # RE2 syntax, as the server reads it
    assert "pattern" not in props["perl"]  # a lookahead the server cannot read: left to it


#: A pattern that backtracks exponentially in Python's ``re`` on a near miss.
BACKTRACKING = "^(a+)+$"
NEAR_MISS = "a" * 40 + "!"


@pytest.mark.timeout(60)
def test_a_backtracking_crd_pattern_checks_config_in_linear_time() -> None:
    node = {"type": "object", "properties": {"name": {"type": "string", "pattern": BACKTRACKING}}}
    schema = CompiledSchema(to_json_schema(node))
    assert schema.valid({"name": "a" * 40})
    assert not schema.valid({"name": NEAR_MISS})  # Python's re: about 10^12 steps
    (error,) = schema.errors({"name": NEAR_MISS}, ("spec",))
    assert list(error.path) == ["spec", "name"]
    assert error.message == f"'{NEAR_MISS}' does not match '{BACKTRACKING}'"


def test_cel_rules_are_counted_where_the_config_reaches() -> None:
    rule = {"x-kubernetes-validations": [{"rule": "self.a > 0"}]}
    node = {"properties": {"a": {"type": "integer"}, "b": {"type": "object", **rule}}, **rule}
    assert server_rules(node, {"a": 1}) == 1
    assert server_rules(node, {"b": {}}) == 2


# -- rule C8, one repo with every kind of mistake ---------------------------------------------

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"kind": "Widget", "plural": "widgets"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["logLevel"],
                                "x-kubernetes-validations": [{"rule": "self.replicas < 5"}],
                                "properties": {
                                    "logLevel": {"type": "string", "enum": ["debug", "info"]},
                                    "replicas": {"type": "integer", "format": "int32"},
                                    "paused": {"type": "boolean"},
                                    "window": {"type": "string", "pattern": "^[0-9]+[hm]$"},
                                    "extra": {
                                        "type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "{m}-operator", "labels": {"app.kubernetes.io/version": "1.0.0"}},
    "spec": {
        "selector": {"matchLabels": {"app": "x"}},
        "template": {
            "metadata": {"labels": {"app": "x"}},
            "spec": {"containers": [{"name": "m", "image": "example.com/op:1.0.0"}]},
        },
    },
}
WIDGET = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "default"}}


def _module(name: str, *, crd: bool = True, default: bool = True) -> dict[str, str]:
    operator = yaml.safe_dump(DEPLOYMENT).replace("{m}", name)
    manifest = (yaml.safe_dump(CRD) + "---\n" if crd else "") + operator
    spec = {"namespace": "widgets", "operator": {"kind": "Deployment", "name": f"{name}-operator"}}
    files = {
        f"modules/{name}/module.yaml": _dump("Module", name, spec),
        f"modules/{name}/1.0.0/manifest.yaml": manifest,
    }
    if default:
        body = {**WIDGET, "spec": {"logLevel": "info"}}
        files[f"modules/{name}/1.0.0/default.yaml"] = yaml.safe_dump(body)
    return files


RUNTIME = f"""\
apiVersion: {API}
kind: Runtime
metadata: {{name: edge}}
spec:
  channel: regular
  cluster: {{inCluster: true}}
  modules:
    - name: widget
      config:
        logLevl: debug
        replicas: "two"
        paused: true
        window: 3 days
        extra: {{anything: [1, 2]}}
    - name: bare
      config: {{logLevel: debug}}
    - name: nocrd
      config: {{logLevel: debug}}
"""
CHANNEL = f"""\
apiVersion: {API}
kind: Channel
metadata: {{name: regular}}
spec:
  modules: {{widget: 1.0.0, bare: 1.0.0, nocrd: 1.0.0}}
  config:
    widget:
      logLevel: trace
      replicas: 3000000000
"""

# (file, line, column, a fragment of the message): one entry per planted mistake.
EXPECTED = [
    ("channels/regular.yaml", 8, 17, "is not one of: debug, info"),
    ("channels/regular.yaml", 9, 17, "must be at most 2147483647"),
    ("runtimes/edge.yaml", 10, 9, "unknown field 'logLevl'; did you mean 'logLevel'?"),
    ("runtimes/edge.yaml", 11, 19, "must be an integer, not a string"),
    ("runtimes/edge.yaml", 13, 17, "does not match the pattern ^[0-9]+[hm]$"),
    ("runtimes/edge.yaml", 16, 15, "has no default configuration (default.yaml)"),
    ("runtimes/edge.yaml", 18, 15, "defines no CustomResourceDefinition for Widget"),
]


def _broken_repo(root: Path) -> Path:
    files = {
        **_module("widget"),
        **_module("bare", default=False),
        **_module("nocrd", crd=False),
        "runtimes/edge.yaml": RUNTIME,
        "channels/regular.yaml": CHANNEL,
    }
    return write_files(root, files)


def test_every_override_mistake_is_reported_at_its_place_in_one_run(tmp_path: Path) -> None:
    root = _broken_repo(tmp_path / "repo")
    result = CliRunner().invoke(cli, ["validate", str(root)])
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if ": C8 " in line]
    found = [(line.split(":")[0:3], line) for line in errors]
    assert len(found) == len(EXPECTED), result.output
    for (file, line, column, fragment), (place, text) in zip(EXPECTED, found, strict=True):
        assert place == [f"{root}/{file}", str(line), str(column)], text
        assert fragment in text, text
    prune = next(line for line in errors if "logLevl" in line)
    assert "the API server would silently prune it" in prune
    cel = [line for line in result.output.splitlines() if ": warning C8 " in line]
    assert len(cel) == 2
    assert all("checked by the API server" in line for line in cel)


def test_a_valid_override_passes_and_a_missing_required_field_is_no_error(tmp_path: Path) -> None:
    runtime = RUNTIME.split("    - name: bare")[0].replace("logLevl: debug", "logLevel: debug")
    runtime = runtime.replace('"two"', "2").replace("3 days", "3h")
    files = {**_module("widget"), "runtimes/edge.yaml": runtime}
    files["channels/regular.yaml"] = _dump("Channel", "regular", {"modules": {"widget": "1.0.0"}})
    validation = load_repo(write_files(tmp_path / "repo", files))
    assert validation.valid, [d.format() for d in validation.diagnostics]


# -- the real prometheus-operator CRDs ---------------------------------------------------------

PROMETHEUS_RUNTIME = f"""\
apiVersion: {API}
kind: Runtime
metadata: {{name: prom}}
spec:
  channel: regular
  cluster: {{inCluster: true}}
  modules:
    - name: prometheus
      config:
        replica: 2
        shards: "two"
        logLevel: verbose
        retention: 10 days
        maximumStartupDurationSeconds: 5
        podMetadata: {{labels: {{team: obs}}}}
"""
PROMETHEUS_EXPECTED = [
    (10, 9, "unknown field 'replica'; did you mean 'replicas'?"),
    (11, 17, "must be an integer, not a string"),
    (12, 19, "is not one of: , debug, info, warn, error"),
    (13, 20, "does not match the pattern"),
    (14, 40, "must be at least 60"),
]


def test_overrides_of_a_prometheus_spec_are_checked_against_the_real_crd(tmp_path: Path) -> None:
    corpus = require_shared("corpus", "prometheus-operator")
    paths = sorted((corpus / "crds").glob("*.yaml")) + sorted((corpus / "operator").glob("*.yaml"))
    manifest = "\n---\n".join(p.read_text(encoding="utf-8") for p in paths)
    prometheus = {"apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus"}
    default = {**prometheus, "metadata": {"name": "main"}, "spec": {"replicas": 1}}
    module = {
        "namespace": "default",
        "operator": {"kind": "Deployment", "name": "prometheus-operator"},
    }
    files = {
        "modules/prometheus/module.yaml": _dump("Module", "prometheus", module),
        "modules/prometheus/0.93.0/manifest.yaml": manifest,
        "modules/prometheus/0.93.0/default.yaml": yaml.safe_dump(default),
        "channels/regular.yaml": _dump("Channel", "regular", {"modules": {"prometheus": "0.93.0"}}),
        "runtimes/prom.yaml": PROMETHEUS_RUNTIME,
    }
    validation = load_repo(write_files(tmp_path / "repo", files))
    found = [(d.line, d.column, d.message) for d in validation.diagnostics]
    assert all(d.rule == "C8" for d in validation.diagnostics), found
    assert len(found) == len(PROMETHEUS_EXPECTED), found
    for (line, column, fragment), (at_line, at_column, message) in zip(
        PROMETHEUS_EXPECTED, found, strict=True
    ):
        assert (at_line, at_column) == (line, column), message
        assert fragment in message
        assert "Prometheus monitoring.coreos.com/v1" in message
    assert any("CEL rule(s)" in w.message for w in validation.warnings)
