"""Tests of reconciler.core: pure values and decisions on plain data."""
