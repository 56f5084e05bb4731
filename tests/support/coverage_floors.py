"""The branch coverage of each package of ``reconciler``, read from coverage's JSON report, and
the floors CI holds ``core``, ``config``, ``lifecycle`` and ``operations`` at.

``.ci/coverage`` runs this after the tests: it prints the table of the README's development
section (one row per package, ``operations.store`` apart from ``operations``) and exits 1 with
one line per package below its floor. The figure is coverage's own: covered statements and
branches over statements and branches (``[tool.coverage]`` in pyproject.toml measures branches).

Usage: ``python -m tests.support.coverage_floors [REPORT]`` (default
``build/coverage/coverage.json``, which ``coverage json`` writes).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import reconciler

#: The folder of the package the report measured.
PACKAGE = Path(reconciler.__file__).resolve().parent
#: The row of the modules directly in ``reconciler/`` (``errors``, ``__main__``).
TOP_LEVEL = "(top level)"
#: The report ``coverage json`` writes ([tool.coverage.json] in pyproject.toml).
DEFAULT_REPORT = Path("build/coverage/coverage.json")

#: The floors (percent) under which CI fails: each a point or two below the package's figure when
#: it was set (the README's development section says why these four).
FLOORS: dict[str, float] = {
    "core": 94.0,
    "config": 91.0,
    "lifecycle": 93.0,
    "operations": 95.0,
}


@dataclass(frozen=True, slots=True)
class Figure:
    """The measured statements and branches of one package."""

    package: str
    statements: int
    covered_lines: int
    branches: int
    covered_branches: int

    @property
    def percent(self) -> float:
        """Covered statements and branches over statements and branches, as coverage has it."""
        total = self.statements + self.branches
        return 100.0 * (self.covered_lines + self.covered_branches) / total if total else 100.0


def package_of(path: str) -> str:
    """The package of a measured file, dotted under ``reconciler``: ``core``,
    ``operations.store``, or :data:`TOP_LEVEL`. A relative path is read from the current
    folder, as coverage writes it."""
    folders = Path(path).resolve().relative_to(PACKAGE).parent.parts
    return ".".join(folders) or TOP_LEVEL


def figures_of(report: Mapping[str, Any]) -> list[Figure]:
    """One figure per package of a coverage JSON report, sorted by package."""
    sums: dict[str, list[int]] = {}
    for path, measured in report["files"].items():
        summary = measured["summary"]
        row = sums.setdefault(package_of(path), [0, 0, 0, 0])
        row[0] += summary["num_statements"]
        row[1] += summary["covered_lines"]
        row[2] += summary.get("num_branches", 0)
        row[3] += summary.get("covered_branches", 0)
    return [Figure(package, *sums[package]) for package in sorted(sums)]


def below_floors(figures: Iterable[Figure], floors: Mapping[str, float]) -> list[str]:
    """One line per package of ``floors`` below its floor or missing from the report."""
    measured = {figure.package: figure.percent for figure in figures}
    failures = []
    for package, floor in floors.items():
        percent = measured.get(package)
        if percent is None:
            failures.append(f"{package}: not in the coverage report (floor {floor:.0f} %)")
        elif round(percent, 1) < floor:
            folder = package.replace(".", "/")
            failures.append(
                f"{package}: {percent:.1f} % of statements and branches covered, under its "
                f"floor of {floor:.0f} % (coverage report -m --include='reconciler/{folder}/*' "
                "lists what no test runs)"
            )
    return failures


def table(figures: Iterable[Figure], floors: Mapping[str, float]) -> str:
    """The README's table: a package per row, its statements, branches and figure, its floor."""
    lines = [
        "| package | statements | branches | covered (statements and branches) | floor |",
        "|---|---:|---:|---:|---:|",
    ]
    for figure in figures:
        name = figure.package if figure.package == TOP_LEVEL else f"`{figure.package}`"
        floor = f"{floors[figure.package]:.0f} %" if figure.package in floors else ""
        lines.append(
            f"| {name} | {figure.statements} | {figure.branches} | {figure.percent:.1f} % "
            f"| {floor} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    """Print the table of the report ``argv[0]`` names; 1 when a package is below its floor."""
    path = Path(argv[0]) if argv else DEFAULT_REPORT
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        print(f"cannot read {path} ({error}): run bash .ci/coverage pytest", file=sys.stderr)
        return 2
    figures = figures_of(report)
    print(table(figures, FLOORS))
    failures = below_floors(figures, FLOORS)
    for failure in failures:
        print(f"coverage: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
