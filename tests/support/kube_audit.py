"""The API calls of a run on the real API server, counted from its audit log.

Counted are the requests of the admin user (the reconciler's and kubectl's), but for those of
the stand-in Deployment controller (tests/support/kube_workloads.py): ``calls`` is every request,
``writes`` every create, update, patch and delete, Events included, and they are broken down
by verb and resource (``discovery`` for requests that name no resource). A dry-run request
(``dryRun=All``: it writes nothing) is counted as ``dry-run <verb>``, not as a write.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from tests.support.kube_workloads import USER_AGENT

WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass(frozen=True, slots=True)
class Calls:
    """The requests of one run, from the audit log."""

    by_kind: dict[str, int]

    @property
    def calls(self) -> int:
        return sum(self.by_kind.values())

    @property
    def writes(self) -> int:
        return sum(n for key, n in self.by_kind.items() if key.split(" ")[0] in WRITES)

    @property
    def dry_runs(self) -> int:
        return sum(n for key, n in self.by_kind.items() if key.startswith("dry-run "))

    @property
    def events(self) -> int:
        return sum(n for key, n in self.by_kind.items() if key.endswith(" events"))

    def text(self) -> str:
        parts = ", ".join(f"{k} {n}" for k, n in sorted(self.by_kind.items()))
        return f"{self.calls} calls, {self.writes} writes ({parts})"


def audit_calls(events: list[dict[str, Any]]) -> Calls:
    """The requests of ``events`` but the stand-in controller's, by ``verb resource``."""
    counts: Counter[str] = Counter()
    for event in events:
        if str(event.get("userAgent") or "").startswith(USER_AGENT):
            continue
        resource = (event.get("objectRef") or {}).get("resource") or "discovery"
        dry = "dry-run " if "dryRun=All" in str(event.get("requestURI") or "") else ""
        counts[f"{dry}{event.get('verb')} {resource}"] += 1
    return Calls(dict(counts))
