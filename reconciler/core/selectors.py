"""Selectors of ``reconciler get`` (pure): kubectl's label selectors and a state selector.

- A label selector (``-l``) is kubectl's: requirements joined by commas, all of which must
  hold: ``key=value`` (or ``==``), ``key!=value``, ``key in (a,b)``, ``key notin (a,b)``,
  ``key`` (has the label), ``!key`` (has not).
- A state selector (``--state-selector``) names states, commas between them: ``Error``,
  ``Error,Processing`` (either), ``!Ready`` (anything but), and Flux's ``ready=false`` /
  ``ready=true``; case does not matter.

Both raise :class:`SelectorError` (a :class:`ValueError`) naming what is wrong; the command
line turns it into a usage error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass


class SelectorError(ValueError):
    """A selector that cannot be read."""


_KEY = r"(?:[a-z0-9A-Z.\-/_]+)"
_VALUE = r"(?:[a-z0-9A-Z._\-]*)"
_EQUALITY = re.compile(rf"^({_KEY})\s*(==|=|!=)\s*({_VALUE})$")
_SET = re.compile(rf"^({_KEY})\s+(in|notin)\s+\(([^()]*)\)$")
_EXISTS = re.compile(rf"^(!?)({_KEY})$")

Labels = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed ``-l`` selector: :meth:`matches` a runtime's labels."""

    text: str
    requirements: tuple[Callable[[Labels], bool], ...]

    def matches(self, labels: Labels) -> bool:
        """Whether every requirement holds for ``labels``."""
        return all(requirement(labels) for requirement in self.requirements)


def parse_label_selector(text: str) -> LabelSelector:
    """``-l`` as kubectl reads it (see the module docstring)."""
    parts = _split_outside_parentheses(text)
    if not parts or any(not part.strip() for part in parts):
        raise SelectorError(f"label selector {text!r}: an empty requirement (e.g. region=eu)")
    return LabelSelector(text, tuple(_requirement(part.strip(), text) for part in parts))


def _split_outside_parentheses(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def _requirement(part: str, text: str) -> Callable[[Labels], bool]:
    if found := _EQUALITY.match(part):
        key, operator, value = found.groups()
        if operator == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if found := _SET.match(part):
        key, operator, listed = found.groups()
        values = frozenset(v.strip() for v in listed.split(",") if v.strip())
        if operator == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if found := _EXISTS.match(part):
        negated, key = found.groups()
        return (lambda labels: key not in labels) if negated else (lambda labels: key in labels)
    raise SelectorError(
        f"label selector {text!r}: cannot read {part!r} (use key=value, key!=value, "
        "key in (a,b), key notin (a,b), key or !key)"
    )


@dataclass(frozen=True, slots=True)
class StateSelector:
    """A parsed ``--state-selector``: :meth:`matches` a state."""

    text: str
    wanted: frozenset[str]
    unwanted: frozenset[str]

    def matches(self, state: str | None) -> bool:
        """Whether ``state`` (any case; ``None`` reads as ``Removed``) is selected."""
        name = (state or "Removed").lower()
        if self.wanted and name not in self.wanted:
            return False
        return name not in self.unwanted


def parse_state_selector(text: str, states: frozenset[str]) -> StateSelector:
    """``--state-selector`` over ``states`` (matched in any case); an unknown state is an error
    naming the known ones."""
    wanted: set[str] = set()
    unwanted: set[str] = set()
    for raw in text.split(","):
        part = raw.strip().lower().replace(" ", "")
        negated = part.startswith("!")
        part = part.removeprefix("!")
        if part in ("ready=false", "ready!=true"):
            negated, part = not negated, "ready"
        elif part in ("ready=true", "ready!=false"):
            part = "ready"
        name = next((s.lower() for s in states if s.lower().replace(" ", "") == part), None)
        if name is None:
            known = ", ".join(sorted(states))
            raise SelectorError(f"state selector {text!r}: no state {raw.strip()!r} ({known})")
        (unwanted if negated else wanted).add(name)
    return StateSelector(text, frozenset(wanted), frozenset(unwanted))
