"""Fault injection at our cluster boundary, for the fault and crash tests and benchmarks.

:class:`FaultyCluster` wraps any :class:`~reconciler.cluster.api.Cluster`. While ``rate`` is
above zero, each call fails with that probability the way an API server or the network makes
it fail, translated as :mod:`reconciler.cluster.kube` translates the client's exceptions:

- ``throttled``: a 429, :class:`~reconciler.errors.ThrottledError` with the server's retry delay;
- ``server``: a 5xx, :class:`~reconciler.errors.ServerError`;
- ``timeout``: the request timed out before an answer, :class:`~reconciler.errors.ServerError`;
- ``lost``: a lost response: a write reaches the cluster and is applied, then the caller gets a
  :class:`~reconciler.errors.ServerError` (for a read, the same as a timeout).

The random choices come from ``random.Random(seed)``: a seed replays the same faults for the
same sequence of calls. Every call is counted (``calls``, by method, and ``total``); ``faults``
counts the injected ones by kind. :meth:`FaultyCluster.plan` injects one given fault into the
next call of a method on a subject, whatever the rate (for tests of one precise case).
``on_call``, when set, is called with the running call number
before and after each call reaches the cluster (``"before"``/``"after"``): the crash tests use
it to stop a process at a chosen API call.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from reconciler.cluster.api import Cluster, ClusterIdentity, KindInfo
from reconciler.core.objects import Body, ObjectRef
from reconciler.errors import ReconcilerError, ServerError, ThrottledError

FAULT_KINDS = ("throttled", "server", "timeout", "lost")
WRITES = frozenset({"apply", "patch", "delete"})

CallHook = Callable[[int, str, str], None]
T = TypeVar("T")


class FaultyCluster:
    """A :class:`Cluster` that injects seeded faults into the calls it passes on."""

    def __init__(self, inner: Cluster, *, seed: int = 0, rate: float = 0.0) -> None:
        self.inner = inner
        self.random = random.Random(seed)
        self.rate = rate
        self.calls: Counter[str] = Counter()
        self.faults: Counter[str] = Counter()
        self.total = 0
        self.on_call: CallHook | None = None
        self.planned: list[tuple[str, str, str]] = []

    def plan(self, fault: str, method: str, subject: str) -> None:
        """Inject ``fault`` (one of :data:`FAULT_KINDS`) into the next ``method`` call on
        ``subject`` (``Kind/namespace/name``)."""
        assert fault in FAULT_KINDS
        self.planned.append((fault, method, subject))

    # -- the Cluster interface ---------------------------------------------------------------

    @property
    def identity(self) -> ClusterIdentity:
        """The wrapped cluster's."""
        return self.inner.identity

    def get(self, ref: ObjectRef) -> Body | None:
        """See :meth:`reconciler.cluster.api.Cluster.get`."""
        return self._call("get", ref.subject, lambda: self.inner.get(ref))

    def list_objects(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> list[Body]:
        """See :meth:`reconciler.cluster.api.Cluster.list_objects`."""
        return self._call(
            "list",
            kind,
            lambda: self.inner.list_objects(api_version, kind, namespace=namespace, labels=labels),
        )

    def apply(
        self,
        body: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        dry_run: bool = False,
    ) -> Body:
        """See :meth:`reconciler.cluster.api.Cluster.apply`."""
        return self._call(
            "apply" if not dry_run else "get",
            ObjectRef.of(body).subject,
            lambda: self.inner.apply(
                body, field_manager=field_manager, force=force, dry_run=dry_run
            ),
        )

    def patch(self, ref: ObjectRef, merge_patch: Mapping[str, Any]) -> Body:
        """See :meth:`reconciler.cluster.api.Cluster.patch`."""
        return self._call("patch", ref.subject, lambda: self.inner.patch(ref, merge_patch))

    def delete(self, ref: ObjectRef, *, propagation: str = "Background") -> bool:
        """See :meth:`reconciler.cluster.api.Cluster.delete`."""
        return self._call(
            "delete", ref.subject, lambda: self.inner.delete(ref, propagation=propagation)
        )

    def kind_info(self, api_version: str, kind: str) -> KindInfo | None:
        """See :meth:`reconciler.cluster.api.Cluster.kind_info` (discovery: counted, and
        faulty like any other read)."""
        return self._call("discovery", kind, lambda: self.inner.kind_info(api_version, kind))

    def kinds_in_group(self, group: str, kind: str) -> KindInfo | None:
        """See :meth:`reconciler.cluster.api.Cluster.kinds_in_group`."""
        return self._call("discovery", kind, lambda: self.inner.kinds_in_group(group, kind))

    def served_kinds(self, *, fresh: bool = False) -> list[KindInfo]:
        """See :meth:`reconciler.cluster.api.Cluster.served_kinds`."""
        return self._call("discovery", "", lambda: self.inner.served_kinds(fresh=fresh))

    # -- internals ---------------------------------------------------------------------------

    def _call(self, method: str, subject: str, forward: Callable[[], T]) -> T:
        self.total += 1
        self.calls[method] += 1
        number = self.total
        fault = self._planned(method, subject) or self._draw()
        if fault is not None and fault != "lost":
            self.faults[fault] += 1
            raise _error(fault, method, subject, self.random)
        if self.on_call is not None:
            self.on_call(number, method, "before")
        result = forward()
        if self.on_call is not None:
            self.on_call(number, method, "after")
        if fault == "lost":
            self.faults[fault] += 1
            raise _error(fault, method, subject, self.random)
        return result

    def _planned(self, method: str, subject: str) -> str | None:
        for index, (fault, wanted_method, wanted_subject) in enumerate(self.planned):
            if (wanted_method, wanted_subject) == (method, subject):
                del self.planned[index]
                return fault
        return None

    def _draw(self) -> str | None:
        if self.rate <= 0 or self.random.random() >= self.rate:
            return None
        return self.random.choice(FAULT_KINDS)


def _error(fault: str, method: str, subject: str, rng: random.Random) -> ReconcilerError:
    """The error :mod:`reconciler.cluster.kube` would raise for this fault."""
    what = f"{method} {subject}"
    if fault == "throttled":
        return ThrottledError(f"{what}: 429 Too Many Requests", retry_after=rng.randint(1, 5))
    if fault == "server":
        status = rng.choice((500, 502, 503, 504))
        return ServerError(f"{what}: {status} the server failed", retry_after=10.0)
    if fault == "timeout":
        return ServerError(f"{what}: cannot reach the API server (ReadTimeoutError)")
    return ServerError(f"{what}: cannot reach the API server (connection reset after sending)")


def is_write(method: str) -> bool:
    """Whether calls of ``method`` change the cluster."""
    return method in WRITES
