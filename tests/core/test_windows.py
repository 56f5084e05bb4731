"""Maintenance windows (reconciler.core.windows) on fixed instants (no real clock): across
daylight-saving changes, and in ordinary weeks (a window past midnight, across the end of the
week, longer than a day, on several days, in a zone that is not UTC).

2026 transitions: Europe/Berlin springs forward on Sunday 29 March at 02:00 CET (01:00 UTC) and
falls back on Sunday 25 October at 03:00 CEST (01:00 UTC); America/New_York springs forward on
Sunday 8 March at 02:00 EST (07:00 UTC) and falls back on Sunday 1 November at 02:00 EDT
(06:00 UTC). The rule (reconciler/core/windows.py): a skipped start opens at the first instant
after the jump; a start the clocks show twice opens at its first occurrence; a window lasts
``duration`` of real time.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import MaintenanceWindow, ModuleRef
from reconciler.core.plan_values import ModuleAction
from reconciler.core.windows import in_window, next_window_start, next_window_text
from tests.support.lifecycle_helpers import repo, sync

BERLIN, NEW_YORK = "Europe/Berlin", "America/New_York"


def _utc(day: str, clock: str) -> datetime:
    return datetime.fromisoformat(f"{day}T{clock}:00+00:00")


def _open_from_to(window: MaintenanceWindow, start: datetime, end: datetime) -> None:
    """Open exactly on [start, end): closed a second before and at the end."""
    second = timedelta(seconds=1)
    assert not in_window(window, start - second)
    assert in_window(window, start)
    assert in_window(window, end - second)
    assert not in_window(window, end)


@pytest.mark.parametrize(
    ("zone", "start", "day", "opens", "closes"),
    [
        # Berlin, spring forward: 02:00 does not exist; opens at 03:00 CEST, lasts 60 min
        (BERLIN, "02:00", "2026-03-29", "01:00", "02:00"),
        # a start inside the skipped hour opens at the jump too, not at 03:30
        (BERLIN, "02:30", "2026-03-29", "01:00", "02:00"),
        # Berlin, fall back: 02:00 happens twice; the first (CEST), for 60 real minutes
        (BERLIN, "02:00", "2026-10-25", "00:00", "01:00"),
        (BERLIN, "02:30", "2026-10-25", "00:30", "01:30"),
        # New York, spring forward: 02:00 and 02:30 do not exist; open at 03:00 EDT
        (NEW_YORK, "02:00", "2026-03-08", "07:00", "08:00"),
        (NEW_YORK, "02:30", "2026-03-08", "07:00", "08:00"),
        # New York, fall back: 01:30 happens twice; the first (EDT); 02:00 only once (EST)
        (NEW_YORK, "01:30", "2026-11-01", "05:30", "06:30"),
        (NEW_YORK, "02:00", "2026-11-01", "07:00", "08:00"),
    ],
)
def test_a_sunday_window_on_transition_days(
    zone: str, start: str, day: str, opens: str, closes: str
) -> None:
    window = MaintenanceWindow(("Sun",), start, 60, zone)

    _open_from_to(window, _utc(day, opens), _utc(day, closes))


def test_berlin_fall_back_window_does_not_last_two_hours() -> None:
    window = MaintenanceWindow(("Sun",), "02:00", 60, BERLIN)

    assert in_window(window, _utc("2026-10-25", "00:30"))  # 02:30 CEST
    assert not in_window(window, _utc("2026-10-25", "01:30"))  # 02:30 CET, the second time


def test_berlin_spring_forward_window_opens() -> None:
    window = MaintenanceWindow(("Sun",), "02:00", 60, BERLIN)

    opened = [
        moment
        for moment in (_utc("2026-03-29", "00:00") + timedelta(minutes=m) for m in range(0, 180))
        if in_window(window, moment)
    ]

    assert len(opened) == 60
    assert opened[0] == _utc("2026-03-29", "01:00")


def test_a_window_across_the_change_lasts_its_duration_in_real_time() -> None:
    # Saturday 23:00 CET for 4h: real time ends at 02:00 UTC, 04:00 CEST on the wall clock
    window = MaintenanceWindow(("Sat",), "23:00", 240, BERLIN)

    _open_from_to(window, _utc("2026-03-28", "22:00"), _utc("2026-03-29", "02:00"))


def test_ordinary_weeks_before_and_after_the_changes() -> None:
    window = MaintenanceWindow(("Sun",), "02:00", 60, BERLIN)

    _open_from_to(window, _utc("2026-03-22", "01:00"), _utc("2026-03-22", "02:00"))  # CET
    _open_from_to(window, _utc("2026-04-05", "00:00"), _utc("2026-04-05", "01:00"))  # CEST
    _open_from_to(window, _utc("2026-11-01", "01:00"), _utc("2026-11-01", "02:00"))  # CET


@pytest.mark.parametrize(
    ("zone", "now", "expected", "shown"),
    [
        (BERLIN, "2026-03-28T12:00", "2026-03-29T01:00", "Sun 2026-03-29 03:00"),
        (BERLIN, "2026-10-24T12:00", "2026-10-25T00:00", "Sun 2026-10-25 02:00"),
        (BERLIN, "2026-10-25T00:30", "2026-11-01T01:00", "Sun 2026-11-01 02:00"),
        (NEW_YORK, "2026-03-07T12:00", "2026-03-08T07:00", "Sun 2026-03-08 03:00"),
        (NEW_YORK, "2026-10-31T12:00", "2026-11-01T07:00", "Sun 2026-11-01 02:00"),
    ],
)
def test_next_opening(zone: str, now: str, expected: str, shown: str) -> None:
    window = MaintenanceWindow(("Sun",), "02:00", 60, zone)
    moment = datetime.fromisoformat(now + "+00:00")

    assert next_window_start(window, moment) == datetime.fromisoformat(expected + "+00:00")
    assert next_window_text(window, moment) == f"{shown} {zone}"


def test_several_days_and_utc() -> None:
    window = MaintenanceWindow(("Sat", "Sun"), "02:00", 240, "UTC")

    assert in_window(window, _utc("2026-11-21", "05:59"))  # a Saturday
    assert not in_window(window, _utc("2026-11-21", "06:00"))
    assert not in_window(window, _utc("2026-11-23", "02:00"))  # a Monday
    assert next_window_start(window, _utc("2026-11-23", "02:00")) == _utc("2026-11-28", "02:00")
    assert not in_window(None, _utc("2026-11-21", "03:00"))


def test_the_planner_defers_an_upgrade_until_the_window_opens_after_the_jump() -> None:
    cluster = InMemoryCluster()
    window = MaintenanceWindow(("Sun",), "02:00", 60, BERLIN)
    sync(cluster, repo(ModuleRef("widget"), regular={"widget": "2.0.0"}, window=window))
    bumped = repo(ModuleRef("widget"), regular={"widget": "2.1.0"}, window=window)

    before = sync(cluster, bumped, now=_utc("2026-03-29", "00:59")).plan.module("widget")
    during = sync(cluster, bumped, now=_utc("2026-03-29", "01:00")).plan.module("widget")

    assert before is not None
    assert during is not None
    assert before.action is ModuleAction.DEFERRED_WINDOW
    assert "(next: Sun 2026-03-29 03:00 Europe/Berlin)" in before.message
    assert during.action is ModuleAction.UPGRADE


# -- ordinary weeks, no daylight-saving change ---------------------------------------------------

#: Saturday 02:00-06:00 UTC.
WEEKEND = MaintenanceWindow(("Sat",), "02:00", 240, "UTC")


def _at(text: str, zone: str = "UTC") -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone))


@pytest.mark.parametrize(
    ("window", "now", "inside"),
    [
        (WEEKEND, _at("2026-11-21T02:00"), True),  # the start is inside
        (WEEKEND, _at("2026-11-21T05:59:59"), True),
        (WEEKEND, _at("2026-11-21T06:00"), False),  # the end is not
        (WEEKEND, _at("2026-11-21T01:59"), False),
        (WEEKEND, _at("2026-11-22T03:00"), False),  # Sunday: not a day of the window
        (WEEKEND, _at("2026-11-18T12:00"), False),
        # past midnight: Saturday 23:00 for 3 hours is open early on Sunday
        (MaintenanceWindow(("Sat",), "23:00", 180, "UTC"), _at("2026-11-22T01:30"), True),
        (MaintenanceWindow(("Sat",), "23:00", 180, "UTC"), _at("2026-11-22T02:00"), False),
        # across the end of the week: Sunday 22:00 for 3 hours is open early on Monday
        (MaintenanceWindow(("Sun",), "22:00", 180, "UTC"), _at("2026-11-23T00:30"), True),
        # a window longer than a day
        (MaintenanceWindow(("Fri",), "20:00", 36 * 60, "UTC"), _at("2026-11-22T07:59"), True),
        (MaintenanceWindow(("Fri",), "20:00", 36 * 60, "UTC"), _at("2026-11-22T08:00"), False),
        # several days
        (MaintenanceWindow(("Tue", "Thu"), "18:30", 90, "UTC"), _at("2026-11-19T19:59"), True),
        (MaintenanceWindow(("Tue", "Thu"), "18:30", 90, "UTC"), _at("2026-11-18T19:00"), False),
    ],
)
def test_in_window(window: MaintenanceWindow, now: datetime, inside: bool) -> None:
    assert in_window(window, now) is inside


def test_a_window_is_read_in_its_own_time_zone() -> None:
    # Singapore has no daylight saving time: 18:00 there is 10:00 UTC all year.
    window = MaintenanceWindow(("Sat",), "18:00", 180, "Asia/Singapore")

    assert in_window(window, _at("2026-11-21T10:00"))
    assert in_window(window, _at("2026-11-21T18:30", "Asia/Singapore"))
    assert not in_window(window, _at("2026-11-21T18:00"))  # 02:00 on Sunday in Singapore
    assert not in_window(window, _at("2026-11-21T09:59"))
