"""Fake clocks for tests that count work instead of waiting: :class:`StepClock` advances a step
each time it is read, so a time budget runs out after a known number of looks (callers: the time
budget and credential scan tests of ``tests/config``)."""

from __future__ import annotations


class StepClock:
    """A clock that advances ``step`` seconds each time it is read."""

    def __init__(self, step: float = 1.0) -> None:
        self.now = 0.0
        self.step = step
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        self.now += self.step
        return self.now
