"""Client-side rate limits per API server: a token bucket, as client-go's (QPS and burst).

A fleet-wide sync or a daemon with many workers must not flood one API server: every request
the real cluster adapter sends (:mod:`reconciler.cluster.kube`) first takes a token from the
bucket of its server, shared by every runtime that reaches that server in this process. The
defaults are kubectl's (50 requests per second, bursts of 300); the settings'
``spec.kubeClient`` and, over them, ``--kube-qps``/``--kube-burst`` (or ``RECONCILER_KUBE_QPS``/
``RECONCILER_KUBE_BURST``) change them.

Pure apart from the clock and the sleep it is given (tests pass fake ones).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from reconciler.core.model import DEFAULT_BURST, DEFAULT_QPS, ClientRate

__all__ = ["DEFAULT_BURST", "DEFAULT_QPS", "Buckets", "ClientRate", "TokenBucket"]


class TokenBucket:
    """``rate.burst`` tokens, refilled at ``rate.qps`` per second; :meth:`take` waits for one.

    Thread-safe: the daemon's workers share one bucket per API server.
    """

    def __init__(
        self,
        rate: ClientRate,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = rate
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(rate.burst)
        self._last = clock()
        self._lock = threading.Lock()
        #: Seconds spent waiting for tokens so far (shown by benchmarks and tests).
        self.waited = 0.0

    def take(self) -> None:
        """Take one token, sleeping until one is there."""
        with self._lock:
            delay = self._reserve()
        if delay > 0:
            self.waited += delay
            self._sleep(delay)

    def _reserve(self) -> float:
        """Take a token now or in the future; the seconds until it is ours."""
        now = self._clock()
        self._tokens = min(
            float(self.rate.burst), self._tokens + (now - self._last) * self.rate.qps
        )
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate.qps


class Buckets:
    """One :class:`TokenBucket` per API server (by its URL), made on first use."""

    def __init__(self, make: Callable[[ClientRate], TokenBucket] = TokenBucket) -> None:
        self._make = make
        self._buckets: dict[tuple[str, ClientRate], TokenBucket] = {}
        self._lock = threading.Lock()

    def for_server(self, server: str, rate: ClientRate) -> TokenBucket:
        """The bucket of ``server`` at ``rate``."""
        with self._lock:
            bucket = self._buckets.get((server, rate))
            if bucket is None:
                bucket = self._buckets[(server, rate)] = self._make(rate)
            return bucket

    def rates_for(self, server: str) -> list[ClientRate]:
        """The rates the buckets of ``server`` were made at, oldest first (for tests)."""
        with self._lock:
            return [rate for (url, rate) in self._buckets if url == server]
