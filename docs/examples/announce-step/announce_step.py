"""An additional step for reconciler operations: after Apply_Modules, append one line per
module to the file named by RECONCILER_ANNOUNCE_FILE (a stand-in for a chat or ticket hook)."""

from __future__ import annotations

import os
from pathlib import Path

from reconciler.operations.model import Operation, OperationType, StepResult
from reconciler.operations.steps import Step, StepContext


class AnnounceModules(Step):
    name = "Announce_Modules"
    domain = "notifications"
    description = "Appends each applied module and version to RECONCILER_ANNOUNCE_FILE."
    optional = True  # Settings can switch it off: spec.operations.disabledSteps
    operations = (OperationType.PROVISION, OperationType.UPDATE)
    stage = "apply"
    after = "Apply_Modules"

    def run(self, operation: Operation, context: StepContext) -> StepResult:
        target = os.environ.get("RECONCILER_ANNOUNCE_FILE")
        if not target:
            return StepResult("RECONCILER_ANNOUNCE_FILE is not set; nothing announced")
        modules = operation.data.applied.modules  # typed: ModuleStatus values
        lines = [f"{operation.runtime} {m.module} {m.version} {m.state}\n" for m in modules]
        with Path(target).open("a", encoding="utf-8") as announcements:
            announcements.writelines(lines)
        return StepResult(f"announced {len(lines)} modules")
