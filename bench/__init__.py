"""Benchmarks, run by hand (see bench/README.md); never part of the test run."""
