"""The daemon's pruning job: keeps the state store's size on a plateau.

Every resync adds an operation per runtime; without this the store of a 1,000-runtime fleet grew
by about 12 MB a resync (1.75 GB a day at the default interval). The job removes what the
:class:`~reconciler.operations.model.Retention` of ``--keep-operations`` and ``--keep-failures``
does not keep (a run of no-change operations merged into its newest, the newest N of each
runtime, failures for D days), at start and every :data:`PRUNE_EVERY`, and the notifications
the outbox delivered or gave up. Several replicas pruning one store at once is harmless: each
removes what is still there. Caller:
:func:`reconciler.daemon.scheduler.schedule_jobs`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.errors import ReconcilerError
from reconciler.operations.model import Retention
from reconciler.operations.store import Prunable

log = logging.getLogger("reconciler.daemon")

#: How often the store is pruned.
PRUNE_EVERY = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class Pruning:
    """The pruning job of one daemon: :meth:`tick` is what the scheduler runs."""

    store: Prunable
    retention: Retention
    clock: Callable[[], datetime]

    def tick(self) -> int:
        """Prune once; how many operations were removed (0 when the store failed: logged,
        and the next tick tries again)."""
        try:
            now = self.clock()
            removed = self.store.prune(self.retention, now)
            sent = self.store.prune_notifications(now)
        except ReconcilerError as error:
            log.warning(
                "pruning the state store failed (tried again in %s): %s", PRUNE_EVERY, error
            )
            return 0
        if removed:
            log.info(
                "pruned %d finished operations (keeping %d per runtime, failures for %s)",
                removed,
                self.retention.keep_per_runtime,
                self.retention.keep_failures_for,
            )
        if sent:
            log.info("pruned %d notifications sent or given up", sent)
        return removed
