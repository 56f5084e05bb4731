"""The fleet generator of the benchmarks writes valid repos, and its mistakes are all found.

The benchmarks' figures mean something only if the generated fleet is valid (so nothing is
skipped) and the corrupted copy's mistakes are each reported, once, in their file.
"""

from __future__ import annotations

from pathlib import Path

from reconciler.source.loader import load_repo
from tests.support.fleet_generator import RUNTIME_MISTAKES, generate_fleet
from tests.support.naive_loader import load_repo_naive


def test_generated_fleet_is_valid_and_deterministic(tmp_path: Path) -> None:
    generate_fleet(tmp_path / "a", runtimes=40, modules=6, versions=2, seed=7)
    generate_fleet(tmp_path / "b", runtimes=40, modules=6, versions=2, seed=7)

    validation = load_repo(tmp_path / "a")
    assert validation.diagnostics == ()
    assert validation.repo is not None
    assert len(validation.repo.runtimes) == 40
    first = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.yaml"))
    assert first == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*.yaml"))
    for path in first:
        assert (tmp_path / "a" / path).read_bytes() == (tmp_path / "b" / path).read_bytes()


def test_every_planted_mistake_is_found_once_and_the_baseline_agrees(tmp_path: Path) -> None:
    planted = generate_fleet(tmp_path, runtimes=60, modules=6, versions=2, corrupt=12)

    ours = load_repo(tmp_path).diagnostics
    assert {c.kind for c in planted} >= set(RUNTIME_MISTAKES)
    assert len(ours) == len(planted)
    assert sorted(Path(d.path).relative_to(tmp_path).as_posix() for d in ours) == sorted(
        c.path for c in planted
    )
    assert load_repo_naive(tmp_path).diagnostics == ours
