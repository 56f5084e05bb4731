"""Reads the JSON Schemas of the config repo's document kinds from disk.

The schemas live in the project's top-level ``schemas/`` folder (a source checkout or an editable
install) and are copied into ``reconciler/_schemas`` in a built wheel. Callers: the schema checker
(through the loader) and the reference-docs generator.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

#: Document kind -> schema file name, in the order the reference docs list them.
SCHEMA_FILES: dict[str, str] = {
    "Runtime": "runtime.schema.json",
    "Module": "module.schema.json",
    "Channel": "channel.schema.json",
    "Settings": "settings.schema.json",
    "Source": "source.schema.json",
}


def schemas_dir() -> Path:
    """The folder that holds the schema files, in a wheel or in a source checkout."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "_schemas", package.parent / "schemas"):
        if (candidate / SCHEMA_FILES["Runtime"]).is_file():
            return candidate
    raise FileNotFoundError(f"no schemas folder next to {package}")


@cache
def load_schemas() -> dict[str, dict[str, Any]]:
    """Every schema, keyed by document kind. Read once per process."""
    folder = schemas_dir()
    return {
        kind: json.loads((folder / name).read_text(encoding="utf-8"))
        for kind, name in SCHEMA_FILES.items()
    }
