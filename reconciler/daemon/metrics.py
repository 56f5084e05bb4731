"""Prometheus metrics of the daemon (prometheus_client), on a registry of its own, with a
number of series bounded by the fleet (one per runtime) rather than by runtimes x modules x
states:

- reconciler_build_info{version,python} (1), process_* and python_info (the process),
- reconciler_reconcile_duration_seconds (histogram),
- reconciler_operations_total{type,result},
- reconciler_runtime_state{runtime,state}: 1, one series per runtime, for its current state
  (the series of a former state is removed), by the rule of ``reconciler status``,
- reconciler_runtime_suspended{runtime}: 1 while the runtime is suspended (as Flux's
  ``gotk_suspend_status``); only suspended runtimes have the series (a fleet's count of
  series stays about one per runtime), removed when resumed,
- reconciler_modules{module,state}: how many runtimes run each module in each state,
- reconciler_source_lag_seconds (how long the remote has had a commit not in force),
- reconciler_last_successful_poll_timestamp_seconds, reconciler_polls_total{result},
- reconciler_commits_refused_total, reconciler_commit_held,
- reconciler_commits_unverified_total{status}: commits refused for a signature (issue 30), by
  the status of the oldest commit to blame (Unsigned, UntrustedKey, BadSignature, ...),
- reconciler_reconcile_failures_total{error}: reconciles that ended on an error (an operation
  that failed, a step retrying on an error, a failure outside one), by error type; /status
  names the runtime,
- reconciler_notifications_total{endpoint,result}: notifications sent to each endpoint by
  result (delivered, failed after its tries, dropped from a full queue),
- reconciler_member{member}: 1, naming this replica (its series are of the runtimes it owns),
  reconciler_members_live and reconciler_owned_runtimes,
- the rollouts' series (:mod:`reconciler.daemon.rollout_metrics`).

No ``_created`` series. Callers: the daemon and its HTTP server.
"""

from __future__ import annotations

import platform
import threading
from collections import Counter as Tally
from datetime import datetime, timedelta

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)

from reconciler import __version__
from reconciler.core.rollout_summary import RolloutSummary
from reconciler.daemon.rollout_metrics import RolloutMetrics
from reconciler.operations.model import Operation, RuntimeStatus

disable_created_metrics()  # type: ignore[no-untyped-call]  # _created series say little

#: The state of a module that left its runtime, in ``reconciler_modules``.
REMOVED = "Removed"


class Metrics:
    """The daemon's metrics."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        Gauge(
            "reconciler_build_info",
            "1, with the version of reconciler and of Python as labels.",
            ["version", "python"],
            registry=self.registry,
        ).labels(__version__, platform.python_version()).set(1)
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
        self._runtimes = Gauge(
            "reconciler_runtime_state",
            "1 for each runtime, labelled with its current state (its worst module's).",
            ["runtime", "state"],
            registry=self.registry,
        )
        self._suspended = Gauge(
            "reconciler_runtime_suspended",
            "1 while the runtime is suspended (spec.suspend or reconciler suspend); no series "
            "for a runtime that is not.",
            ["runtime"],
            registry=self.registry,
        )
        self._modules = Gauge(
            "reconciler_modules",
            "Runtimes running each module, by the module's state.",
            ["module", "state"],
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
            "Reconciles of a runtime that ended in an error, by error type.",
            ["error"],
            registry=self.registry,
        )
        self._drifts = Counter(
            "reconciler_drift",
            "Objects of ours changed or deleted by someone else, seen by a watch, by kind.",
            ["kind"],
            registry=self.registry,
        )
        self._watches = Gauge(
            "reconciler_watches_open",
            "Watches open on the owned runtimes' clusters (one per cluster and kind; each a "
            "long-lived request).",
            registry=self.registry,
        )
        self._wakes = Counter(
            "reconciler_wakes",
            "Reconciles of a runtime started by a watch event (debounced), not by a timer.",
            registry=self.registry,
        )
        self._refused = Counter(
            "reconciler_commits_refused",
            "Commits refused (invalid or unreadable); the last one is in /status.",
            registry=self.registry,
        )
        self._unverified = Counter(
            "reconciler_commits_unverified",
            "Commits refused because a commit lacks a good signature from a trusted key, by "
            "the signature status of the oldest commit to blame.",
            ["status"],
            registry=self.registry,
        )
        self._held = Gauge(
            "reconciler_commit_held",
            "1 while the newest commit is held by the deletion brake.",
            registry=self.registry,
        )
        self._notifications = Counter(
            "reconciler_notifications",
            "Notifications to each endpoint by result: delivered, failed (after its tries), "
            "dropped (the queue was full).",
            ["endpoint", "result"],
            registry=self.registry,
        )
        self._member = Gauge(
            "reconciler_member",
            "1, naming this replica among the daemons sharing the state store.",
            ["member"],
            registry=self.registry,
        )
        self._live = Gauge(
            "reconciler_members_live",
            "Replicas alive (beating within the lease), this one included.",
            registry=self.registry,
        )
        self._owned = Gauge(
            "reconciler_owned_runtimes",
            "Runtimes this replica owns.",
            registry=self.registry,
        )
        self._polls = Counter(
            "reconciler_polls",
            "Polls of the source by result.",
            ["result"],
            registry=self.registry,
        )
        self._rollouts = RolloutMetrics(self.registry)
        #: Each runtime's state shown, and its modules' states (for the per-module counts).
        self._states: dict[str, str] = {}
        self._module_states: dict[str, dict[str, str]] = {}
        self._counts: Tally[tuple[str, str]] = Tally()
        self._suspended_now: set[str] = set()
        self._lock = threading.Lock()

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

    def runtime_status(self, status: RuntimeStatus) -> None:
        """A runtime's state now (:meth:`RuntimeStatus.of`'s rule, as ``reconciler status``
        shows it): its one ``reconciler_runtime_state`` series (the former state's removed),
        whether it is suspended, and the per-module counts of ``reconciler_modules`` (updated
        by the difference from the runtime's last status: constant work per runtime)."""
        record = status.current
        state = status.state
        modules = {m.module: str(m.state) if m.state else REMOVED for m in record.modules}
        with self._lock:
            self._suspension(record.runtime, status.suspended)
            before = self._states.get(record.runtime)
            if before is not None and before != state:
                self._runtimes.remove(record.runtime, before)
            self._runtimes.labels(record.runtime, state).set(1)
            self._states[record.runtime] = state
            old = self._module_states.get(record.runtime, {})
            self._module_states[record.runtime] = modules
            changed = set(old.items()) ^ set(modules.items())
            self._counts.subtract(old.items())
            self._counts.update(modules.items())
            for module, module_state in changed:
                self._modules.labels(module, module_state).set(self._counts[(module, module_state)])

    def _suspension(self, runtime: str, suspended: bool) -> None:
        """The runtime's ``reconciler_runtime_suspended`` series: there while suspended."""
        if suspended:
            self._suspended.labels(runtime).set(1)
            self._suspended_now.add(runtime)
        elif runtime in self._suspended_now:
            self._suspended.remove(runtime)
            self._suspended_now.discard(runtime)

    def forget_runtime(self, runtime: str) -> None:
        """A runtime the store no longer knows (deprovisioned): its series go."""
        with self._lock:
            before = self._states.pop(runtime, None)
            if before is not None:
                self._runtimes.remove(runtime, before)
            self._suspension(runtime, False)
            old = self._module_states.pop(runtime, {})
            self._counts.subtract(old.items())
            for module, module_state in old.items():
                self._modules.labels(module, module_state).set(self._counts[(module, module_state)])

    def reconcile_failed(self, runtime: str, error: str) -> None:
        """Count a runtime's reconcile that ended on an error, by the error's type name (the
        runtime is in the logs and /status, not a label, so the series stay few)."""
        del runtime
        self._failures.labels(error).inc()

    def drift(self, runtime: str, kind: str) -> None:
        """Count a drift a watch saw (the runtime and object are in the log and /status)."""
        del runtime
        self._drifts.labels(kind).inc()

    def watches(self, open_now: int) -> None:
        """How many watches are open now."""
        self._watches.set(open_now)

    def woken(self) -> None:
        """Count a reconcile a watch event started."""
        self._wakes.inc()

    def membership(self, member: str, live: int, owned: int) -> None:
        """This replica's name, how many replicas are alive and how many runtimes it owns."""
        self._member.labels(member).set(1)
        self._live.set(live)
        self._owned.set(owned)

    def commit_refused(self) -> None:
        """Count a refused commit."""
        self._refused.inc()

    def commit_unverified(self, status: str) -> None:
        """Count a commit refused for a signature (``status``: the oldest one to blame)."""
        self._unverified.labels(status).inc()

    def held(self, held: bool) -> None:
        """Whether the newest commit is held by the deletion brake."""
        self._held.set(1.0 if held else 0.0)

    def notification(self, endpoint: str, result: str) -> None:
        """Count one notification to ``endpoint`` that ended with ``result`` (the delivery's
        report, :class:`reconciler.notify.delivery.Report`)."""
        self._notifications.labels(endpoint, result).inc()

    def rollouts(self, newest: list[RolloutSummary]) -> None:
        """The series of the ``newest`` rollouts (their summaries; and of no older one)."""
        self._rollouts.show(newest)

    def exposition(self) -> bytes:
        """The text format for ``/metrics``."""
        return bytes(generate_latest(self.registry))
