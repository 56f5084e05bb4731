"""The step plugins installed here, by name (reads package metadata and imports the plugins).

``reconciler validate`` needs to know which step names ``spec.operations.disabledSteps`` may use:
the built-in optional steps and those of installed plugins (the ``reconciler.steps`` entry
point). The engine loads the plugin classes itself when it builds operations; this module only
lists their names, once per process. It reads the installation (package metadata), as
:mod:`reconciler.source.schemas` reads the bundled schemas, so it sits with the loader below
``operations``. Callers: the loader; the engine takes :data:`ENTRY_POINT_GROUP`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

ENTRY_POINT_GROUP = "reconciler.steps"


@lru_cache(maxsize=1)
def load_plugin_step_names() -> Mapping[str, bool]:
    """Name -> optional of every installed plugin step. A plugin that cannot be imported is left
    out: building an operation reports it, with its entry point."""
    from importlib.metadata import entry_points  # ~10 ms: only when a repo disables steps

    found: dict[str, bool] = {}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            step = entry.load()
        except Exception:  # noqa: S112 (any error of foreign code: the engine reports it)
            continue
        name = getattr(step, "name", None)
        if isinstance(step, type) and isinstance(name, str) and name:
            found[name] = bool(getattr(step, "optional", False))
    return found
