"""The naive baseline of the validation benchmark.

The same validation rules as ``reconciler validate`` (so both must find the same errors), with the
parts a straightforward implementation would use: PyYAML's pure-Python ``SafeLoader`` and, for
every document, what ``jsonschema.validate()`` does on each call (check the schema, build a
validator), collecting every error rather than the first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import yaml

from reconciler.diagnostics import Diagnostic
from reconciler.loader import ReadOptions, load_repo
from reconciler.schema import SchemaChecker, diagnostics_of
from reconciler.schemafiles import load_schemas
from reconciler.validate import Validation
from reconciler.yamlsafe import Document


class NaiveSchemaChecker(SchemaChecker):
    """Per document: check the schema, build a fresh validator, list every error."""

    def check(self, kind: str, document: Document) -> list[Diagnostic]:
        schema: Any = self.schemas[kind]
        validator_class: Any = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
        errors = list(validator_class(schema).iter_errors(document.data))
        return diagnostics_of(errors, document)


def load_repo_naive(path: Path) -> Validation:
    """Validate the repo at ``path`` the naive way."""
    options = ReadOptions(yaml_loader=yaml.SafeLoader)
    return load_repo(path, options, NaiveSchemaChecker(load_schemas(), fast=False))
