"""Tests of reconciler.cli: each command as a user meets it."""
