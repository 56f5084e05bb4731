"""The rollout series of the daemon's metrics, for the newest rollouts (at most five, so the
series stay few):

- reconciler_rollout_state{rollout,state}: 1, for each rollout's state;
- reconciler_rollout_wave{rollout,wave}: 1, naming the wave under way (or the last one);
- reconciler_rollout_waves{rollout}: how many waves it has;
- reconciler_rollout_runtimes{rollout,state}: its runtimes by state (Pending, Progressing,
  Ready, Error, Skipped);
- reconciler_rollout_progress_ratio{rollout}: the share of its runtimes Ready on its commit;
- reconciler_rollout_halted{rollout,reason}: 1 while halted or canceled, with the reason.

Caller: :class:`reconciler.daemon.metrics.Metrics`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Gauge

from reconciler.core.rollout_summary import RolloutSummary
from reconciler.core.rollouts import RolloutState


class RolloutMetrics:
    """The gauges above on a registry, set from the newest rollouts at each look."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def gauge(name: str, text: str, labels: list[str]) -> Gauge:
            return Gauge(name, text, labels, registry=registry)

        self._state = gauge(
            "reconciler_rollout_state", "1, for a rollout's state.", ["rollout", "state"]
        )
        self._wave = gauge(
            "reconciler_rollout_wave", "1, naming a rollout's wave under way.", ["rollout", "wave"]
        )
        self._waves = gauge(
            "reconciler_rollout_waves", "How many waves a rollout has.", ["rollout"]
        )
        self._runtimes = gauge(
            "reconciler_rollout_runtimes", "A rollout's runtimes by state.", ["rollout", "state"]
        )
        self._progress = gauge(
            "reconciler_rollout_progress_ratio",
            "The share of a rollout's runtimes Ready on its commit.",
            ["rollout"],
        )
        self._halted = gauge(
            "reconciler_rollout_halted",
            "1 while a rollout is halted or canceled, with the reason.",
            ["rollout", "reason"],
        )
        self._all = (
            self._state,
            self._wave,
            self._waves,
            self._runtimes,
            self._progress,
            self._halted,
        )
        self._lock = threading.Lock()

    def show(self, rollouts: Sequence[RolloutSummary]) -> None:
        """The series of ``rollouts`` (the newest ones' summaries: no member read) and no
        others."""
        with self._lock:
            for gauge in self._all:
                gauge.clear()
            for rollout in rollouts:
                self._state.labels(rollout.id, str(rollout.state)).set(1)
                self._wave.labels(rollout.id, rollout.waves[rollout.wave].name).set(1)
                self._waves.labels(rollout.id).set(len(rollout.waves))
                for state, count in rollout.counts().items():
                    self._runtimes.labels(rollout.id, state).set(count)
                self._progress.labels(rollout.id).set(rollout.progress)
                if rollout.state in (RolloutState.HALTED, RolloutState.CANCELED):
                    self._halted.labels(rollout.id, str(rollout.reason or "")).set(1)
