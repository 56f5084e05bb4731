"""A real state store whose operation saves are counted and recorded as they were written (the
store boundary watched, nothing faked): tests of how often the engine saves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.operations.model import FenceToken, Operation, OperationState, StepState
from reconciler.operations.store import StateStore


@dataclass(frozen=True)
class Saved:
    """What one save wrote: the operation's state, each stage's done flag and step states."""

    state: OperationState
    stages: tuple[tuple[bool, tuple[StepState, ...]], ...]


class CountingStore:
    """A real store whose saves are counted and recorded as they were written."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.saved: list[Saved] = []

    def save(self, operation: Operation, fence: FenceToken | None = None) -> None:
        """Record what is written, then write it."""
        stages = tuple((s.done, tuple(t.state for t in s.steps)) for s in operation.stages)
        self.saved.append(Saved(operation.state, stages))
        self.store.save(operation, fence)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)
