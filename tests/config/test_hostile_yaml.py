"""The hostile YAML corpus: generated files, each read as a commit by the real loader and validator
in worker processes. No crash (a worker killed by a signal), no traceback, every refusal located.
How long each file takes is the benchmark's to report, not a test's to assert (a loaded machine made
a wall-clock check fail): the budget itself is tested on a fake clock in
tests/config/test_time_budget.py. The report (files read, the slowest file) is printed: ``pytest
tests/config/test_hostile_yaml.py -rP``.

The test reads a sample of the corpus (every tenth file of each family, and every file whose
refusal is known, about 400 of 2,644) with a 2 s budget per file instead of the default 10 s, so
that the files that run into their budget (huge scalars, alias bombs, very long lines) cost a
few seconds, not minutes on a loaded machine. The whole corpus with the default budget is the
benchmark: ``python bench/hostile_yaml_bench.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.source.loader import load_repo
from tests.support.hostile_corpus import (
    PROMETHEUS,
    Case,
    MemoryTree,
    Outcome,
    Run,
    base_files,
    corpus,
    run_corpus,
    summary,
)
from tests.support.repos import RepoFactory, small_repo
from tests.support.tools import require_shared

#: The per-file budget the workers read with (a fifth of the default).
FILE_BUDGET = 2.0
#: Every STRIDE-th file of each family is read (and every file whose refusal is known).
STRIDE = 10


def sample(cases: list[Case]) -> tuple[int, ...]:
    """The numbers of the cases the test reads: the first of each family and every STRIDE-th
    after it, and every case with an expected refusal."""
    seen: dict[str, int] = {}
    chosen = []
    for index, case in enumerate(cases):
        family = case.name.split("/")[0]
        position = seen[family] = seen.get(family, -1) + 1
        if position % STRIDE == 0 or case.expect is not None:
            chosen.append(index)
    return tuple(chosen)


@pytest.fixture(scope="module")
def outcomes() -> list[Outcome]:
    """The sample read once by two worker processes (about 4 s: see the module docstring)."""
    cases = corpus()
    run = Run(workers=2, batch=100, file_budget=FILE_BUDGET, case_timeout=60, only=sample(cases))
    found = run_corpus(run)
    report = summary(found, [cases[o.index] for o in found])
    slowest = report["slowest"]
    print(
        f"\nhostile YAML corpus: {report['files']:,} files ({report['bytes'] / 1e6:.1f} MB), "
        f"{report['accepted']:,} accepted, {report['refused']:,} refused, "
        f"{report['crashes']} crashes, {report['tracebacks']} tracebacks, "
        f"{report['over_budget']} stopped by their budget; slowest file: {slowest['name']} "
        f"({slowest['seconds']:.2f} s)"
    )
    return found


def test_the_corpus_is_large_deterministic_and_uses_real_files() -> None:
    assert require_shared("corpus", "prometheus-operator") == PROMETHEUS
    cases = corpus()

    assert len(cases) >= 2_000
    assert any(c.name.startswith("flip/prometheus/crds/") for c in cases)
    assert [(c.name, c.data) for c in corpus()[:300]] == [(c.name, c.data) for c in cases[:300]]
    families = {c.name.split("/")[0] for c in cases}
    assert families >= {
        "flip", "truncate", "nesting", "huge", "number", "alias", "tag", "utf8", "nul", "bom",
        "crlf", "long", "merge", "splice",
    }  # fmt: skip


def test_the_base_repo_is_valid_so_every_refusal_comes_from_the_hostile_file() -> None:
    validation = load_repo("repo", tree=MemoryTree(base_files()))

    assert validation.diagnostics == ()


def test_no_file_crashes_the_reader(outcomes: list[Outcome]) -> None:
    crashes = [f"{o.name}: {o.crash}" for o in outcomes if o.crash is not None]

    assert crashes == []
    assert [o.index for o in outcomes] == list(sample(corpus()))


def test_the_sample_has_every_family_and_every_known_refusal() -> None:
    cases = corpus()
    chosen = [cases[i] for i in sample(cases)]

    assert {c.name.split("/")[0] for c in chosen} == {c.name.split("/")[0] for c in cases}
    assert [c for c in chosen if c.expect] == [c for c in cases if c.expect]
    assert len(chosen) < len(cases) // 4


def test_no_file_gives_a_traceback(outcomes: list[Outcome]) -> None:
    errors = [f"{o.name}: {o.error}" for o in outcomes if o.error is not None]

    assert errors == []


def test_every_refusal_is_located(outcomes: list[Outcome]) -> None:
    unlocated = [
        f"{o.name}: {d}"
        for o in outcomes
        for d in o.diagnostics
        if not (d[0].startswith("repo/") and d[1] >= 1 and d[2] >= 1 and d[3] and d[4])
    ]

    assert unlocated == []
    assert sum(1 for o in outcomes if o.diagnostic_count) > len(outcomes) // 2


def test_known_hostile_files_are_refused_for_their_reason(outcomes: list[Outcome]) -> None:
    by_index = {o.index: o for o in outcomes}
    missed = []
    for index, case in enumerate(corpus()):
        if case.expect is None or index not in by_index:
            continue
        messages = [d[4] for d in by_index[index].diagnostics if d[3] == "C6"]
        if not any(case.expect in m or "s budget" in m for m in messages):
            missed.append(f"{case.name}: {messages[:2]}")

    assert missed == []


# -- the command line refuses such a commit, with the place ------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- " * 100_000 + "x\n", "runtimes/deep.yaml:1:403: C6 nesting deeper than 200 levels"),
        ("? " * 100_000 + "x\n", "runtimes/deep.yaml:1:403: C6 nesting deeper than 200 levels"),
        ("spec:\n  replicas: !!int 0x_\n", "runtimes/deep.yaml:2:13: C6 not a valid integer"),
        ("a: !!int " + "7" * 5_000 + "\n", "runtimes/deep.yaml:1:4: C6 not a valid integer"),
    ],
    ids=["block-sequence", "complex-keys", "hex", "long-integer"],
)
def test_validate_refuses_the_commit_with_a_located_error(
    make_repo: RepoFactory, text: str, expected: str
) -> None:
    repo = make_repo({**small_repo(), "runtimes/deep.yaml": text})

    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "validate", str(repo)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )

    assert done.returncode == 1, done.stderr[-500:]
    assert f"{repo}/{expected}" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
