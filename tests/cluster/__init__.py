"""Tests of reconciler.cluster: the in-memory cluster, snapshot files and the real adapter (some on
a real API server)."""
