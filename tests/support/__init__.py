"""Helpers shared by the tests (and by bench/, which may import them; never the other way)."""
