"""Reads the JSON Schemas of the config repo's document kinds from disk, and keeps their
compiled fast checks on disk.

The schemas live in the project's top-level ``schemas/`` folder (a source checkout or an editable
install) and are copied into ``reconciler/_schemas`` in a built wheel. fastjsonschema turns each
into Python code that takes longer to generate and compile (30-70 ms for the four) than a
1,000-runtime repo takes to check; :func:`disk_compiler` keeps that code compiled, by content
(a digest of the schema, fastjsonschema's version and the interpreter's bytecode), in the user's
cache folder, as Python keeps a module's bytecode. Callers: the schema checker (through the
loader and the command line) and the reference-docs generator.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import marshal
import os
import re
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import fastjsonschema

from reconciler.config.schema import SchemaChecker

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


def schema_checker(cache_dir: Path | None = None) -> SchemaChecker:
    """The checker of every kind; with ``cache_dir``, its fast checks compiled once per machine
    (:func:`disk_compiler`)."""
    compiler = disk_compiler(cache_dir) if cache_dir is not None else None
    return SchemaChecker(load_schemas(), compiler=compiler)


def disk_compiler(folder: Path) -> Callable[[Mapping[str, Any]], Callable[[Any], Any]]:
    """A compiler of fast checks that keeps each one's bytecode in ``folder``, named by a digest
    of what it was compiled from; a file missing, unreadable or damaged is compiled again and
    rewritten (atomically; a folder that cannot be written is only not used)."""

    def compiled(view: Mapping[str, Any]) -> Callable[[Any], Any]:
        digest = _digest(view)
        path = folder / f"{digest}.marshal"
        entry, code = _load_compiled(path)
        if code is None:
            source = fastjsonschema.compile_to_code(dict(view), use_default=False)
            entry = _ENTRY.search(source).group(1)  # type: ignore[union-attr]
            code = compile(source, f"<schema {digest[:12]}>", "exec")
            _save_compiled(path, entry, code)
        namespace: dict[str, Any] = {}
        exec(code, namespace)  # noqa: S102 (fastjsonschema's own generated code, as compile runs it)
        check: Callable[[Any], Any] = namespace[entry]
        return check

    return compiled


#: The validator a generated module defines first: the schema's root.
_ENTRY = re.compile(r"^def (\w+)\(", re.MULTILINE)


def _digest(view: Mapping[str, Any]) -> str:
    text = json.dumps(view, sort_keys=True, separators=(",", ":"))
    salt = f"{fastjsonschema.VERSION}\0{importlib.util.MAGIC_NUMBER.hex()}\0"
    return hashlib.sha256((salt + text).encode()).hexdigest()


def _load_compiled(path: Path) -> tuple[str, Any]:
    try:
        # our own file (written below), trusted as Python trusts its __pycache__
        entry, code = marshal.loads(path.read_bytes())  # noqa: S302
    except (OSError, ValueError, EOFError, TypeError):
        return "", None
    if not isinstance(entry, str) or type(code).__name__ != "code":
        return "", None
    return entry, code


def _save_compiled(path: Path, entry: str, code: Any) -> None:
    import tempfile  # only when a check was compiled (once per machine and schema)

    temporary: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".schema-")
        with os.fdopen(handle, "wb") as file:
            file.write(marshal.dumps((entry, code)))
        os.replace(temporary, path)
    except OSError:  # a cache that cannot be written costs the compile next time, nothing else
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
