"""Prometheus metrics of the daemon (prometheus_client), on a registry of its own.

- reconciler_reconcile_duration_seconds (histogram),
- reconciler_operations_total{type,result},
- reconciler_module_state{runtime,module,state} (1 for the current state, 0 for every other
  :class:`~reconciler.core.status.ModuleState`),
- reconciler_source_lag_seconds (how long the remote has had a commit not in force),
- reconciler_last_successful_poll_timestamp_seconds, reconciler_polls_total{result},
- reconciler_reconcile_failures_total{runtime,error}, reconciler_commit_held.

Callers: the daemon and its HTTP server.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from reconciler.core.status import ModuleState
from reconciler.operations.model import Operation, RuntimeRecord


class Metrics:
    """The daemon's metrics."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._duration = Histogram(
            "reconciler_reconcile_duration_seconds",
            "Time of one runtime's reconcile.",
            registry=self.registry,
        )
        self._operations = Counter(
            "reconciler_operations",
            "Operation runs by type and result.",
            ["type", "result"],
            registry=self.registry,
        )
        self._modules = Gauge(
            "reconciler_module_state",
            "1 for each module's current state.",
            ["runtime", "module", "state"],
            registry=self.registry,
        )
        self._lag = Gauge(
            "reconciler_source_lag_seconds",
            "How long the remote has had a commit that is not in force (0: up to date).",
            registry=self.registry,
        )
        self._last_poll = Gauge(
            "reconciler_last_successful_poll_timestamp_seconds",
            "Unix time of the last poll that reached the source.",
            registry=self.registry,
        )
        self._failures = Counter(
            "reconciler_reconcile_failures",
            "Reconciles of a runtime that ended in an error, by runtime and error type.",
            ["runtime", "error"],
            registry=self.registry,
        )
        self._held = Gauge(
            "reconciler_commit_held",
            "1 while the newest commit is held by the deletion brake.",
            registry=self.registry,
        )
        self._shown: dict[str, set[str]] = {}
        self._lock = threading.Lock()
        self._polls = Counter(
            "reconciler_polls",
            "Polls of the source by result.",
            ["result"],
            registry=self.registry,
        )

    def poll(self, ok: bool, now: datetime | None = None) -> None:
        """Count a poll."""
        self._polls.labels("ok" if ok else "unreachable").inc()
        if ok and now is not None:
            self._last_poll.set(now.timestamp())

    def source_lag(self, seconds: float) -> None:
        """Set the source lag."""
        self._lag.set(seconds)

    def operation(self, operation: Operation, took: timedelta) -> None:
        """Count an operation run and its duration."""
        self._duration.observe(took.total_seconds())
        self._operations.labels(str(operation.type), str(operation.state)).inc()

    def runtime_status(self, record: RuntimeRecord) -> None:
        """Module states of a runtime's status: 1 for each module's state, 0 for the others
        (every :class:`ModuleState`); a module shown before and gone now has 0 for every state."""
        states = {m.module: m.state for m in record.modules}
        with self._lock:
            gone = self._shown.get(record.runtime, set()) - set(states)
            self._shown[record.runtime] = set(states)
        for module in sorted(gone):
            states[module] = None
        for module, current in states.items():
            for state in ModuleState:
                value = 1.0 if current is state else 0.0
                self._modules.labels(record.runtime, module, str(state)).set(value)

    def reconcile_failed(self, runtime: str, error: BaseException) -> None:
        """Count a runtime's reconcile that ended in an error."""
        self._failures.labels(runtime, type(error).__name__).inc()

    def held(self, held: bool) -> None:
        """Whether the newest commit is held by the deletion brake."""
        self._held.set(1.0 if held else 0.0)

    def exposition(self) -> bytes:
        """The text format for ``/metrics``."""
        return bytes(generate_latest(self.registry))
