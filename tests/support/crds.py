"""CustomResourceDefinitions for tests: one namespaced kind in a group, served and stored at
``v1``, with the schema a test needs (callers: the contract tests, the API call counts and the
API-economy fleet)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: A schema that keeps every field of the custom resource.
ANY_FIELDS: Mapping[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def namespaced_crd(
    group: str, kind: str, schema: Mapping[str, Any] | None = None, *, list_kind: bool = False
) -> dict[str, Any]:
    """The CRD of ``kind`` in ``group`` (plural: the kind in lower case with an ``s``); its
    ``v1`` schema ``schema`` (an object of any fields but unchecked ones: the default), and the
    ``listKind`` named when ``list_kind``."""
    plural = kind.lower() + "s"
    names = {"kind": kind, "plural": plural, "singular": kind.lower()}
    if list_kind:
        names["listKind"] = f"{kind}List"
    version = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": dict(schema or {"type": "object"})},
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": "Namespaced", "names": names, "versions": [version]},
    }
