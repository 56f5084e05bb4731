"""The naive baseline of the validation benchmark.

The same validation rules as ``reconciler validate`` (so both must find the same errors), with the
parts a straightforward implementation would use:

- PyYAML's pure-Python ``yaml.SafeLoader`` instead of the libyaml parser (and no memo of
  plain-scalar tags: that lives in the default loader class only);
- for every document, what ``jsonschema.validate()`` does on each call: pick the validator class
  for the schema's ``$schema``, check the schema itself, build a validator, and then (unlike
  ``validate()``, which raises the best error only) list every error. No compiled fast path.

Errors become diagnostics through the same conversion as ours
(:func:`reconciler.config.schema.diagnostics_of`, which wraps the private ``_diagnostics``
and merges a
misspelled required field into one error), so any difference in the error sets is a bug.

    python bench/naive.py REPO      # prints the errors like ``reconciler validate``, and the time
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import yaml

from reconciler.config.budget import TimeBudget
from reconciler.config.schema import SchemaChecker, diagnostics_of
from reconciler.config.validate import Validation
from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic
from reconciler.source.loader import ReadOptions, load_repo
from reconciler.source.schemas import load_schemas


class NaiveSchemaChecker(SchemaChecker):
    """Per document: check the schema, build a fresh validator, list every error."""

    def check(
        self, kind: str, document: Document, budget: TimeBudget | None = None
    ) -> list[Diagnostic]:
        schema: Any = self.schemas[kind]
        cls: Any = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validator = cls(schema)
        errors = list(validator.iter_errors(document.data))
        return diagnostics_of(errors, document)


def load_repo_naive(path: str | Path) -> Validation:
    """Validate the repo at ``path`` the naive way."""
    options = ReadOptions(yaml_loader=yaml.SafeLoader)
    return load_repo(path, options, NaiveSchemaChecker(load_schemas(), fast=False))
