"""The step plugins installed here, by name (reads package metadata and imports the plugins).

``reconciler validate`` needs to know which step names ``spec.operations.disabledSteps`` (and
``retryWithoutFail.steps``) may use: the built-in optional steps and those of installed plugins
(the ``reconciler.steps`` entry point). The engine loads the plugin classes itself when it
builds operations; this module only lists their names and traits, once per process. It reads
the installation (package metadata), as :mod:`reconciler.source.schemas` reads the bundled
schemas, so it sits with the loader below ``operations``. Callers: the loader; the engine
takes :data:`ENTRY_POINT_GROUP`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from reconciler.config.settings_checks import StepTraits

ENTRY_POINT_GROUP = "reconciler.steps"


@lru_cache(maxsize=1)
def load_plugin_step_names() -> Mapping[str, StepTraits]:
    """Name -> what Settings may say about it (optional, retries without fail) of every installed
    plugin step. A plugin that cannot be imported is left out: building an operation reports
    it, with its entry point."""
    from importlib.metadata import entry_points  # ~10 ms: only when a repo disables steps

    found: dict[str, StepTraits] = {}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            step = entry.load()
        except Exception:  # noqa: S112 (any error of foreign code: the engine reports it)
            continue
        name = getattr(step, "name", None)
        if isinstance(step, type) and isinstance(name, str) and name:
            retries = getattr(step, "retry_without_fail", None)
            found[name] = StepTraits(
                optional=bool(getattr(step, "optional", False)),
                retries_without_fail=retries is not None and retries is not False,
            )
    return found
