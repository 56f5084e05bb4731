"""The test suite, grouped by concept (see each module docstring)."""
