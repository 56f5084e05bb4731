"""Tests of reconciler.config: reading YAML, the schema, the repo rules (C1-C8), credentials,
budgets."""
