"""Chart modules for tests: a small chart written as a module version folder of a repo."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tests.support.repos import API, dump, dump_all
from tests.support.tools import require_shared

#: A chart with one ConfigMap whose data shows the values, one Deployment (the module's
#: operator), a ``---# comment`` document start and notes.
CHART_TEMPLATES: dict[str, str] = {
    "templates/config.yaml": (
        "---# the settings, as Helm splits a comment after the separator\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-settings\n"
        "data:\n  greeting: {{ .Values.greeting | quote }}\n"
        "  size: {{ .Values.size | quote }}\n"
        "  namespace: {{ .Release.Namespace | quote }}\n"
    ),
    "templates/operator.yaml": (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-operator\n"
        "  labels:\n    app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}\n"
        "spec:\n  replicas: {{ .Values.replicas }}\n"
        "  selector:\n    matchLabels: {app: op}\n"
        "  template:\n    metadata:\n      labels: {app: op}\n"
        "    spec:\n      containers:\n        - name: op\n          image: example/op:1\n"
    ),
    "templates/NOTES.txt": "Thanks for installing {{ .Release.Name }}: not YAML at all: [\n",
}


def templates_with_crds(crds: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """:data:`CHART_TEMPLATES` and a template rendering ``crds`` while ``.Values.crds`` is true
    (as cert-manager's ``crds.enabled``)."""
    toggled = "{{- if .Values.crds }}\n" + dump_all(crds) + "{{- end }}\n"
    return {**CHART_TEMPLATES, "templates/crds.yaml": toggled}


def chart_module_files(
    name: str,
    version: str = "1.0.0",
    *,
    defaults: Mapping[str, Any] | None = None,
    values: Mapping[str, Any] | None = None,
    templates: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``modules/<name>/``: module.yaml and a chart version folder (``chart/`` with
    ``Chart.yaml``, its defaults as ``chart/values.yaml``, and ``values.yaml`` when given)."""
    spec = {
        "namespace": f"{name}-system",
        "operator": {"kind": "Deployment", "name": f"{name}-operator"},
    }
    module = {"apiVersion": API, "kind": "Module", "metadata": {"name": name}, "spec": spec}
    chart = {"apiVersion": "v2", "name": name, "version": version, "appVersion": version}
    folder = f"modules/{name}/{version}"
    files = {
        f"modules/{name}/module.yaml": dump(module),
        f"{folder}/chart/Chart.yaml": dump(chart),
        f"{folder}/chart/values.yaml": dump(
            dict(defaults or {"greeting": "hello", "size": "small", "replicas": 1})
        ),
    }
    for path, text in (templates or CHART_TEMPLATES).items():
        files[f"{folder}/chart/{path}"] = text
    if values is not None:
        files[f"{folder}/values.yaml"] = dump(dict(values))
    return files


#: Values that switch the corpus charts' hooks off (docs/charts.md, Hooks); cert-manager with
#: its CRDs.
CERT_MANAGER = {"crds": {"enabled": True}, "startupapicheck": {"enabled": False}}
INGRESS_NGINX = {"controller": {"admissionWebhooks": {"enabled": False}}}


def corpus_chart_module(
    name: str,
    chart: str,
    version: str,
    *,
    namespace: str,
    operator: str,
    values: Mapping[str, Any] | None = None,
    hooks: str | None = None,
) -> dict[str, str | bytes]:
    """``modules/<name>/``: a module whose version ``version`` is the corpus chart ``chart``
    (copied unmodified into ``chart/``), with ``values`` as the version's ``values.yaml``.
    Skips the test (fails it under CI) without the shared corpus."""
    spec: dict[str, Any] = {
        "namespace": namespace,
        "operator": {"kind": "Deployment", "name": operator},
    }
    if hooks is not None:
        spec["hooks"] = hooks  # Refuse | Skip (docs/charts.md, Hooks)
    module = {"apiVersion": API, "kind": "Module", "metadata": {"name": name}, "spec": spec}
    folder = f"modules/{name}/{version}"
    files: dict[str, str | bytes] = {f"modules/{name}/module.yaml": dump(module)}
    source = require_shared("corpus", "charts", chart)
    for path in sorted(source.rglob("*")):
        if path.is_file():
            files[f"{folder}/chart/{path.relative_to(source).as_posix()}"] = path.read_bytes()
    if values is not None:
        files[f"{folder}/values.yaml"] = dump(dict(values))
    return files
