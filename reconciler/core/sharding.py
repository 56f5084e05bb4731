"""Which daemon replica owns which runtime (pure): consistent hashing with bounded loads.

Every live member is placed on a hash ring at many points (virtual nodes); a runtime goes to the
first member clockwise from its own hash that still has room, a member's room being
``ceil(load_factor * runtimes / members)`` (Mirrokni, Thorup and Zadimoghaddam, "Consistent
Hashing with Bounded Loads", 2018; Argo CD shards its controller the same way). So:

- every member gets about its share, never more than ``load_factor`` times it;
- a member joining or leaving moves about ``1/N`` of the runtimes, not most of them (a plain
  ``hash % N`` moves ``(N-1)/N``);
- every replica computes the same answer from the same member list, without talking.

Runtimes are placed in the order of their position on the ring, so the answer does not depend
on the order they are given in.
"""

from __future__ import annotations

import hashlib
import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping

#: Points of each member on the ring: enough for even shares with a handful of members.
VIRTUAL_NODES = 160
#: How far above its share a member's load may go.
LOAD_FACTOR = 1.25


def _point(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def assign(
    runtimes: Iterable[str],
    members: Iterable[str],
    *,
    load_factor: float = LOAD_FACTOR,
    virtual_nodes: int = VIRTUAL_NODES,
) -> dict[str, str]:
    """Runtime -> the member that owns it (empty when there is no member)."""
    names = sorted(set(members))
    wanted = sorted(set(runtimes), key=lambda runtime: (_point(runtime), runtime))
    if not names or not wanted:
        return {}
    ring = sorted(
        (_point(f"{member}#{index}"), member) for member in names for index in range(virtual_nodes)
    )
    points = [point for point, _ in ring]
    room = math.ceil(load_factor * len(wanted) / len(names))
    loads = dict.fromkeys(names, 0)
    owners: dict[str, str] = {}
    for runtime in wanted:
        start = bisect_right(points, _point(runtime))
        for step in range(len(ring)):
            member = ring[(start + step) % len(ring)][1]
            if loads[member] < room:
                owners[runtime] = member
                loads[member] += 1
                break
    return owners


def moved(before: Mapping[str, str], after: Mapping[str, str]) -> int:
    """How many runtimes of ``before`` have another owner (or none) in ``after``."""
    return sum(1 for runtime, owner in before.items() if after.get(runtime) != owner)
