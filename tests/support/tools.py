"""External checkers the tests run (kubectl, checkov, actionlint, shellcheck), and the shared
material beside the repo (``../shared``): where to find them.

They are installed by ``bash .ci/install-tools`` into ``.venv-tools`` (apart from the project's
venv), or found in ``RECONCILER_TOOLS_BIN``, or on ``PATH``. A test that needs a missing one is
skipped, except under CI (``CI`` set), where it fails: CI must run every check. The same holds
for a test that reads ``../shared`` (the corpus of real manifests), which a fresh clone lacks.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INSTALL_HINT = "install the checkers with: bash .ci/install-tools"
#: The material shared by the projects of this workspace, beside the repo (CI has it there).
SHARED = REPO.parent / "shared"


def find_tool(name: str) -> Path | None:
    """The executable ``name`` from RECONCILER_TOOLS_BIN, .venv-tools/bin, else PATH."""
    folders = [os.environ.get("RECONCILER_TOOLS_BIN", ""), str(REPO / ".venv-tools" / "bin")]
    for folder in folders:
        candidate = Path(folder) / name if folder else None
        if candidate is not None and candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    return Path(found) if found else None


def require_tool(name: str) -> Path:
    """The executable ``name``; skips the test (fails it under CI) when it is not installed."""
    found = find_tool(name)
    if found is not None:
        return found
    message = f"{name} is not installed: {INSTALL_HINT}"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def require_shared(*parts: str) -> Path:
    """The folder ``../shared/<parts>``; skips the test with one line when it is not there (a
    fresh clone), fails it under CI, where it must be."""
    found = SHARED.joinpath(*parts)
    if found.is_dir():
        return found
    message = f"needs {found} (the shared material beside the repo; a fresh clone has none)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
