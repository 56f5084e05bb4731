"""The fleet diff plans once per situation: the same answers as planning each runtime alone.

A generated fleet in a real git repository; the pull request bumps a module that needs no
downtime (every runtime's plan is the same whatever its maintenance window) and one whose new
version requires downtime (the window decides: now, or deferred). The plans a
:class:`FleetDiffer` shares between runtimes must equal those of a differ that sees one runtime
only, and the work saved is counted through the differ's counters, never timed.
"""

from __future__ import annotations

import subprocess
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.core.fleetdiff import FleetDiffer, Outcome
from reconciler.core.model import ConfigRepo
from reconciler.review.fleet import Review, Side
from reconciler.source.loader import ReadOptions
from tests.support.fleet_generator import generate_fleet

GIT = ["git", "-c", "user.email=test@example.io", "-c", "user.name=test"]
NOW = datetime(2026, 11, 20, 3, 17, tzinfo=UTC)


def _sides(root: Path, bumps: dict[str, str]) -> tuple[ConfigRepo, ConfigRepo]:
    generate_fleet(root, 120, modules=6, versions=3)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "fleet"]):
        subprocess.run([*GIT, *args], cwd=root, check=True)
    channel = root / "channels" / "regular.yaml"
    text = channel.read_text()
    for module, version in bumps.items():
        assert f"{module}: 1.0.0" in text
        text = text.replace(f"{module}: 1.0.0", f"{module}: {version}")
    channel.write_text(text)
    review = Review(ReadOptions())
    (base, _), (head, _) = review.load_both(Side(root, "HEAD"), Side(root))
    return base, head


def _alone(base: ConfigRepo, head: ConfigRepo, name: str, now: datetime = NOW) -> FleetDiffer:
    """A differ that knows one runtime only: nothing planned for another can be reused."""
    one = {n: r for n, r in head.runtimes.items() if n == name}
    was = {n: r for n, r in base.runtimes.items() if n == name}
    return FleetDiffer(replace(base, runtimes=was), replace(head, runtimes=one), now)


def test_a_version_without_downtime_is_planned_once_for_every_window(tmp_path: Path) -> None:
    base, head = _sides(tmp_path, {"mod-03": "1.1.0"})
    differ = FleetDiffer(base, head, NOW)
    diff = differ.diff()

    changed = [r for r in diff.runtimes if any(m.module == "mod-03" for m in r.modules)]
    windows = {head.runtimes[r.runtime].maintenance_window for r in changed}
    assert len(changed) > 20
    assert len(windows) > 2  # runtimes with different windows
    strategies = {m.plan.strategy for r in changed for m in r.modules}
    assert differ.planned_situations == len(strategies)  # not one per window
    assert differ.assumed_situations == len(strategies)  # the base's objects in server form
    for change in diff.runtimes:
        assert _alone(base, head, change.runtime).diff().runtimes == (change,)


@pytest.mark.parametrize("when", [NOW, datetime(2026, 11, 21, 22, tzinfo=UTC)])
def test_a_version_requiring_downtime_is_planned_per_window(tmp_path: Path, when: datetime) -> None:
    base, head = _sides(tmp_path, {"mod-01": "1.2.0", "mod-03": "1.1.0"})
    assert head.modules["mod-01"].versions["1.2.0"].requires_downtime
    differ = FleetDiffer(base, head, when)
    diff = differ.diff()

    outcomes = {m.outcome for r in diff.runtimes for m in r.modules if m.module == "mod-01"}
    assert Outcome.WINDOW in outcomes  # the window decides
    changed = [m for r in diff.runtimes for m in r.modules]
    strategies = {(m.module, m.plan.strategy) for m in changed}
    assert differ.planned_situations > len(strategies)  # mod-01: per window
    assert differ.assumed_situations == len(strategies)
    for change in diff.runtimes:
        assert _alone(base, head, change.runtime, when).diff().runtimes == (change,)
