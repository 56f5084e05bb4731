"""Plugin steps installed as a user installs them: a small package with a ``reconciler.steps``
entry point, written to disk and installed with pip into a folder that goes on ``PYTHONPATH``
(callers: the operations tests in real processes, the fencing trials and the end-to-end daemon
tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def write_step_package(root: Path, module: str, source: str, entry: str) -> Path:
    """A pip-installable package under ``root`` of one Python module ``module`` (``source``) whose
    class ``entry`` is a ``reconciler.steps`` entry point: its folder."""
    package = root / f"src-{module}"
    package.mkdir(parents=True, exist_ok=True)
    (package / f"{module}.py").write_text(source)
    (package / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{module.replace("_", "-")}"\nversion = "0.1.0"\n'
        f'[project.entry-points."reconciler.steps"]\n{module} = "{module}:{entry}"\n'
        f'[tool.setuptools]\npy-modules = ["{module}"]\n'
    )
    return package


def install_step_package(package: Path, target: Path) -> None:
    """``pip install`` ``package`` into the folder ``target`` (put it on ``PYTHONPATH``)."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(package),
        ],
        check=True,
        capture_output=True,
    )
