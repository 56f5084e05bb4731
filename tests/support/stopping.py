"""What tests of a stopping daemon share: a stop event that notes when a run waits on it (the
moment to stop the daemon), and the state of each step of an operation."""

from __future__ import annotations

import threading

from reconciler.operations.model import Operation, StepState


class NotedStop(threading.Event):
    """A daemon's ``stopping`` event whose :attr:`waiting` is set once anything waits on it (a
    run paused within a pass)."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()
        #: How many waits began on it so far.
        self.waits = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waits += 1
        self.waiting.set()
        return super().wait(timeout)


def steps_of(operation: Operation) -> dict[str, StepState]:
    """Step name -> its state, over the operation's stages."""
    return {step.name: step.state for stage in operation.stages for step in stage.steps}
