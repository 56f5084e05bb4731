"""Tests of reconciler.daemon, in process: commit verdicts, replicas, the HTTP port, metrics."""
