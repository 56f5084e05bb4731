"""The coverage CI measures and holds: the README's table names every package of ``reconciler``
with the floors CI checks, and a real coverage report reads into a figure per package, failing
the check (exit 1, one line per package) when a held package is below its floor."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.coverage_floors import FLOORS, PACKAGE, TOP_LEVEL, Figure, below_floors

ROOT = Path(__file__).resolve().parents[2]
HEADER = "| package | statements | branches | covered (statements and branches) | floor |"


def _table_rows(readme: str) -> dict[str, str]:
    """The README's coverage table: each row's package and floor column."""
    lines = readme.splitlines()
    assert HEADER in lines, "the development section's coverage table is missing"
    start = lines.index(HEADER) + 2
    rows: dict[str, str] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[-1]
    return rows


def _packages() -> set[str]:
    folders = (path.parent.relative_to(PACKAGE) for path in PACKAGE.rglob("__init__.py"))
    return {".".join(folder.parts) or TOP_LEVEL for folder in folders}


def test_the_readme_coverage_table_names_every_package() -> None:
    rows = _table_rows((ROOT / "README.md").read_text(encoding="utf-8"))

    assert sorted(rows) == sorted(_packages()), "regenerate it: bash .ci/coverage pytest"


def test_the_readme_shows_the_floors_ci_holds() -> None:
    rows = _table_rows((ROOT / "README.md").read_text(encoding="utf-8"))

    shown = {package: floor for package, floor in rows.items() if floor}
    assert shown == {package: f"{floor:.0f} %" for package, floor in FLOORS.items()}


def test_a_real_report_gives_each_package_a_figure_and_fails_below_a_floor(
    tmp_path: Path,
) -> None:
    """``reconciler --version`` runs almost nothing of the held packages: the check prints a row
    for every package and fails, naming each held package below its floor."""
    rcfile = tmp_path / "coverage.toml"
    rcfile.write_text('[tool.coverage.run]\nbranch = true\nsource = ["reconciler"]\n')
    data, report = tmp_path / ".coverage", tmp_path / "coverage.json"
    coverage = [sys.executable, "-m", "coverage"]
    common = [f"--rcfile={rcfile}", f"--data-file={data}"]
    run = [*coverage, "run", *common, "-m", "reconciler", "--version"]
    subprocess.run(run, cwd=ROOT, check=True, capture_output=True)
    subprocess.run(
        [*coverage, "json", *common, "-o", str(report)], cwd=ROOT, check=True, capture_output=True
    )

    check = subprocess.run(
        [sys.executable, "-m", "tests.support.coverage_floors", str(report)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )

    assert check.returncode == 1, check.stderr
    named = {row.split(" | ")[0].strip("|` ") for row in check.stdout.splitlines()[2:]}
    assert named == _packages()
    failing = {line.split(":")[1].strip() for line in check.stderr.splitlines()}
    assert failing == set(FLOORS)


def test_a_held_package_at_its_floor_passes_and_a_tenth_below_fails() -> None:
    """The floor compares the figure as the table shows it (one decimal)."""
    at_floor = Figure("core", statements=1000, covered_lines=900, branches=0, covered_branches=0)
    below = Figure("core", statements=1000, covered_lines=899, branches=0, covered_branches=0)

    assert below_floors([at_floor], {"core": 90.0}) == []
    assert [line.split(":")[0] for line in below_floors([below], {"core": 90.0})] == ["core"]
    assert below_floors([], {"core": 90.0}) == ["core: not in the coverage report (floor 90 %)"]
