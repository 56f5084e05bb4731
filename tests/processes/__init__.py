"""Tests with real processes: crashes (SIGKILL), replicas on one store, a daemon under abuse or a
store outage."""
