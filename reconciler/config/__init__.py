"""Reading and checking config text (pure): safe YAML, JSON Schema checks, credentials, manifest
structure, settings checks and whole-repo validation (rules C1-C7). The files themselves are read
by :mod:`reconciler.source`.
"""
