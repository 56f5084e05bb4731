"""Helm hooks run in the phases of a module's install, upgrade or removal (docs/charts.md).

A module whose chart has hooks (core.hooks) runs, when a pass installs or upgrades it, its
``pre-`` phase before any of its objects is written and its ``post-`` phase once they are all
applied; a removal runs ``pre-delete`` before the deletion and ``post-delete`` after it. In a
phase each hook is created in order (weight, kind, name) and, a Job or a Pod, waited for before
the next: its completion is the hook's result, its failure fails the module (Error, the Job
and its condition's message named) and the install or upgrade stops there. Hooks are deleted by
their ``helm.sh/hook-delete-policy``: an earlier run's before creating again
(``before-hook-creation``, the default), all of a phase once it succeeded (``hook-succeeded``),
a failed one (``hook-failed``).

What ran is kept in a :class:`HookLedger`: per module, the kind of run (``install``,
``upgrade``, ``delete``) and the phases done, kept with the operation by its step and saved as
soon as a phase starts or ends, so a pass that runs again (a retry, a restarted daemon) never
runs a finished phase again, and finds a hook of its own run by its annotation
(``reconciler.dev/hook-run``: the operation and the phase) to wait for it again rather than
create it twice. Waiting is the small :func:`await_result`; a hook still running leaves the
module Processing (``WaitingForHook``) and the pass goes on, the operation retrying the stage.
Callers: the installer (lifecycle.apply) and the remover (lifecycle.remove).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.core.hooks import (
    ANNOTATION_HOOK_RUN,
    BEFORE_HOOK_CREATION,
    HOOK_FAILED,
    HOOK_SUCCEEDED,
    RUN_PHASES,
    Hook,
    job_result,
    phase_hooks,
)
from reconciler.core.objects import ObjectRef
from reconciler.core.plan_values import ModulePlan
from reconciler.core.status import ModuleError, ModuleState, ModuleStatus, Reason
from reconciler.errors import PermanentError
from reconciler.lifecycle.observe import Observer
from reconciler.lifecycle.write import Writer

#: How long a pass waits for a hook Job it created (or found running) before it leaves the
#: module Processing and the operation retries (on a cluster that moves on by itself).
HOOK_WAIT_SECONDS = 10.0


@dataclass(slots=True)
class HookLedger:
    """The hook runs of one operation: module -> ``{"kind": ..., "done": [phases]}``; ``run``
    names the operation in the hooks it creates; ``persist`` saves the ledger at once."""

    run: str
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    persist: Callable[[], None] = lambda: None

    @classmethod
    def of(
        cls, kept: Mapping[str, Any], run: str, persist: Callable[[], None] = lambda: None
    ) -> HookLedger:
        """The ledger a step kept in its operation (``kept_by``), for run ``run``."""
        runs = {str(k): dict(v) for k, v in (kept.get("hooks") or {}).items()}
        return cls(run, runs, persist)

    def data(self) -> dict[str, Any]:
        """What the step keeps (JSON)."""
        return {"hooks": {k: dict(v) for k, v in sorted(self.runs.items())}} if self.runs else {}

    def begin(self, module: str, kind: str) -> None:
        """``module``'s run of ``kind`` starts (kept; saved)."""
        if module not in self.runs:
            self.runs[module] = {"kind": kind, "done": []}
            self.persist()

    def kind(self, module: str) -> str | None:
        """The kind of run begun for ``module`` in this operation."""
        found = self.runs.get(module)
        return str(found["kind"]) if found else None

    def done(self, module: str, phase: str) -> bool:
        """Whether ``module``'s ``phase`` finished in this operation."""
        return phase in (self.runs.get(module) or {}).get("done", ())

    def finish(self, module: str, phase: str) -> None:
        """``module``'s ``phase`` finished (kept; saved before its hooks are deleted)."""
        self.runs[module]["done"] = [*self.runs[module]["done"], phase]
        self.persist()


@dataclass(slots=True)
class HookRunner:
    """Runs the phases of the modules' hooks through ``writer`` (see the module docstring)."""

    observer: Observer
    writer: Writer
    ledger: HookLedger
    #: Waits while its first argument holds, its second seconds at most (the installer's).
    wait: Callable[[Callable[[], bool], float], None]

    def phase(
        self, entry: ModulePlan, hooks: Sequence[Mapping[str, Any]], when: int, kind: str | None
    ) -> ModuleStatus | None:
        """Run phase ``when`` (0: pre, 1: post) of ``entry``'s module's run of ``kind`` (the
        ledger's when begun earlier in this operation); ``None`` when it is done (or has
        nothing to run), else the module's status: Processing while a hook runs (Deleting in a
        removal, so that its step retries), Error when one failed."""
        module = entry.module
        kind = self.ledger.kind(module) or kind
        if kind is None or not hooks:
            return None
        phase = RUN_PHASES[kind][when]
        if self.ledger.done(module, phase):
            return None
        self.ledger.begin(module, kind)
        ordered = phase_hooks(hooks, phase)
        run = f"{self.ledger.run}/{phase}"
        for hook in ordered:
            status = self._run_one(entry, hook, phase, run)
            if status is not None and kind == "delete" and status.state is ModuleState.PROCESSING:
                return replace(status, state=ModuleState.DELETING)  # the removal retries
            if status is not None:
                return status
        self.ledger.finish(module, phase)
        for hook in ordered:
            if HOOK_SUCCEEDED in hook.policies:
                self.writer.delete(hook.ref)
        return None

    def _run_one(self, entry: ModulePlan, hook: Hook, phase: str, run: str) -> ModuleStatus | None:
        live = self.observer.read(hook.ref, fresh=True)
        if live is None or _run_of(live) != run:
            if live is not None:
                blocked = self._clear_earlier(entry, hook, phase)
                if blocked is not None:
                    return blocked
            body = copy.deepcopy(dict(hook.body))
            body["metadata"]["annotations"] = {
                **(body["metadata"].get("annotations") or {}),
                ANNOTATION_HOOK_RUN: run,
            }
            self.writer.apply(body)
            if not hook.waited_for:
                return None
            live = self.observer.read(hook.ref, fresh=True)
        if live is None:
            return _waiting(entry, f"hook {hook.subject} ({phase}) is not found after creation")
        done, why = await_result(self.observer, self.wait, hook.ref, live)
        if done is None:
            return _waiting(entry, f"waiting for hook {hook.subject} ({phase}) to complete")
        if done:
            return None
        if HOOK_FAILED in hook.policies:
            self.writer.delete(hook.ref)
        return _failed(entry, f"hook {hook.subject} ({phase}) failed: {why}")

    def _clear_earlier(self, entry: ModulePlan, hook: Hook, phase: str) -> ModuleStatus | None:
        """An earlier run's object of ``hook`` deleted (``before-hook-creation``); a status
        when it cannot be (its policy keeps it, as Helm then fails) or is not gone yet."""
        if BEFORE_HOOK_CREATION not in hook.policies:
            return _failed(
                entry,
                f"hook {hook.subject} ({phase}) exists from an earlier run and its "
                f"helm.sh/hook-delete-policy ({', '.join(sorted(hook.policies))}) keeps it: "
                "delete it, or add before-hook-creation",
            )
        self.writer.delete(hook.ref)
        if self.observer.read(hook.ref, fresh=True) is not None:
            return _waiting(entry, f"waiting for the earlier run of hook {hook.subject} to go")
        return None


def await_result(
    observer: Observer,
    wait: Callable[[Callable[[], bool], float], None],
    ref: ObjectRef,
    live: Mapping[str, Any],
) -> tuple[bool | None, str]:
    """A hook's result (core.hooks.job_result), waited for by ``wait`` (the installer's:
    :data:`HOOK_WAIT_SECONDS` at most, on a cluster that moves on by itself); ``None`` while
    it still runs."""
    found: list[Mapping[str, Any] | None] = [live]

    def running() -> bool:
        body = found[0]
        if body is not None and job_result(body)[0] is not None:
            return False
        found[0] = observer.read(ref, fresh=True)
        return found[0] is None or job_result(found[0])[0] is None

    wait(running, HOOK_WAIT_SECONDS)
    body = found[0]
    return job_result(body) if body is not None else (None, "")


def _run_of(body: Mapping[str, Any]) -> str:
    return str(((body.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_HOOK_RUN))


def _waiting(entry: ModulePlan, message: str) -> ModuleStatus:
    version = entry.to_version or entry.from_version
    return ModuleStatus(
        entry.module, ModuleState.PROCESSING, Reason.WAITING_FOR_HOOK, message, version
    )


def _failed(entry: ModulePlan, message: str) -> ModuleStatus:
    return ModuleStatus(
        entry.module,
        ModuleState.ERROR,
        Reason.HOOK_FAILED,
        message,
        entry.from_version,
        ModuleError(PermanentError, message),
    )
