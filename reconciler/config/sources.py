"""Checks of a ``source.yaml`` beyond its schema (pure): the version folder of kind ``source``
names an artifact in an OCI registry or an HTTP chart repository (docs/sources.md).
Callers: the validator."""

from __future__ import annotations

from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic


def source_problems(document: Document) -> list[Diagnostic]:
    """C1: what the schema of ``source.yaml`` cannot say: an HTTP chart repository needs
    ``spec.chart`` (the chart's name in its index), an ``oci://`` URL names the artifact."""
    spec = document.data["spec"]
    oci = str(spec["url"]).startswith("oci://")
    if not oci and "chart" not in spec:
        message = "an HTTP chart repository needs spec.chart: the chart's name in its index.yaml"
        return [document.diagnostic("C1", message, ("spec", "url"))]
    if oci and "chart" in spec:
        message = "spec.chart is for HTTP chart repositories: an oci:// URL names the artifact"
        return [document.diagnostic("C1", message, ("spec", "chart"), key=True)]
    return []
