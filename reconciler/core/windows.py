"""Maintenance windows: when a weekly window opens, and whether it is open now (pure).

A window (``days``, ``start`` as local ``HH:MM``, ``duration``, ``timezone``) opens on each
listed week day at ``start`` on the wall clock of ``timezone`` and stays open for ``duration`` of
real (elapsed) time. The local opening times come from dateutil's ``rrule`` (a weekly recurrence
of wall-clock times), and each becomes an instant by the zone's rules (zoneinfo, the IANA
database); the end is that instant plus ``duration``. At daylight-saving changes:

- a start that does not exist that day (the clocks spring forward over it: 02:00 or 02:30 in
  Europe/Berlin on the last Sunday of March) opens at the first instant after the jump (03:00
  local), as cron runs a job of the skipped hour, and still lasts ``duration``;
- a start that exists twice (the clocks fall back over it: 02:00 in Europe/Berlin on the last
  Sunday of October) opens at its first occurrence (02:00 summer time) and lasts exactly
  ``duration``: a 60-minute window closes as the clocks show 02:00 for the second time.

Callers: the planner (L10), the fleet diff.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from reconciler.core.model import MaintenanceWindow

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
#: Local days looked at around a moment: a window opens at most a week and lasts at most 24h.
_BEFORE, _AFTER = timedelta(days=2), timedelta(days=8)


def in_window(window: MaintenanceWindow | None, now: datetime) -> bool:
    """Whether ``now`` (aware) falls in the weekly ``window``; no window means never."""
    if window is None:
        return False
    moment = now.astimezone(UTC)
    duration = timedelta(minutes=window.duration_minutes)
    return any(start <= moment < start + duration for start in openings(window, moment))


def next_window_start(window: MaintenanceWindow, now: datetime) -> datetime:
    """The instant (UTC) the window opens next after ``now``."""
    moment = now.astimezone(UTC)
    later = [start for start in openings(window, moment) if start > moment]
    if not later:
        raise ValueError("a maintenance window needs at least one day")
    return min(later)


def next_window_text(window: MaintenanceWindow, now: datetime) -> str:
    """The next opening on the window's wall clock: ``Sun 2026-03-29 03:00 Europe/Berlin``."""
    local = next_window_start(window, now).astimezone(ZoneInfo(window.timezone))
    return f"{local.strftime('%a %Y-%m-%d %H:%M')} {window.timezone}"


def openings(window: MaintenanceWindow, around: datetime) -> list[datetime]:
    """The instants (UTC) the window opens at, from two local days before ``around`` (aware)
    to eight after, in order."""
    from dateutil import rrule  # only when a window's openings are asked (startup time)

    zone = ZoneInfo(window.timezone)
    hour, minute = (int(part) for part in window.start.split(":"))
    today = around.astimezone(zone).date()
    first = datetime.combine(today - _BEFORE, time(hour, minute))
    last = datetime.combine(today + _AFTER, time(hour, minute))
    weekly = rrule.rrule(
        rrule.WEEKLY,
        dtstart=first,
        until=last,
        byweekday=[rrule.weekday(DAYS.index(day)) for day in window.days],
        byhour=hour,
        byminute=minute,
        bysecond=0,
    )
    return [opening_instant(wall, zone) for wall in weekly]


def opening_instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """The instant (UTC) at which the local wall-clock time ``wall`` (naive) is reached in
    ``zone``: its first occurrence when the clocks show it twice, the first instant after the
    jump when they skip it."""
    from dateutil.tz import datetime_exists

    local = wall.replace(tzinfo=zone, fold=0)
    if datetime_exists(local):
        return local.astimezone(UTC)
    return _end_of_gap(wall, zone)


def _end_of_gap(wall: datetime, zone: ZoneInfo) -> datetime:
    """The instant the clocks jumped over ``wall``. PEP 495 maps a skipped time to an instant
    before the jump with ``fold=1`` and to one after it with ``fold=0``; the jump lies between,
    where the wall clock first reaches ``wall`` (found to the second)."""
    before = int(wall.replace(tzinfo=zone, fold=1).timestamp())
    after = int(wall.replace(tzinfo=zone, fold=0).timestamp())
    while after - before > 1:
        middle = (before + after) // 2
        if _wall(middle, zone) >= wall:
            after = middle
        else:
            before = middle
    return datetime.fromtimestamp(after, UTC)


def _wall(timestamp: int, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(timestamp, zone).replace(tzinfo=None)
