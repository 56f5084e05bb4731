"""Tests of reconciler.operations: stages and retryable steps, the engine, the state store as the
engine uses it."""
