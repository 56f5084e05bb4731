"""Time budgets: a file or commit that takes too long to read and check is refused with one located
C6 diagnostic, never waited for. A fake clock stands for time: each reading of it advances a step,
so budgets run out after a known amount of work."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

from reconciler.config.budget import (
    DEFAULT_COMMIT_SECONDS,
    DEFAULT_FILE_SECONDS,
    TimeBudget,
    budget_diagnostic,
)
from reconciler.config.raw import RawFile, RawRepo
from reconciler.config.schema import SchemaChecker
from reconciler.config.validate import validate_repo
from reconciler.config.yamlsafe import parse_yaml
from reconciler.core.diagnostics import Diagnostic
from reconciler.errors import OverBudgetError
from reconciler.source.loader import ReadOptions, load_repo
from reconciler.source.schemas import load_schemas
from tests.support.clocks import StepClock
from tests.support.repos import API, RepoFactory, small_repo


def _look(budget: TimeBudget, times: int, path: str | None = None) -> None:
    """Look at ``budget`` ``times`` times (inside the window of ``path`` when given)."""
    if path is not None:
        with budget.file(path):
            _look(budget, times)
        return
    for _ in range(times):
        budget.check()


# -- the budget itself ---------------------------------------------------------------------------


def test_the_defaults_are_ten_seconds_a_file_and_two_minutes_a_commit() -> None:
    options = ReadOptions()

    assert (options.file_time_budget, options.commit_time_budget) == (10.0, 120.0)
    assert (DEFAULT_FILE_SECONDS, DEFAULT_COMMIT_SECONDS) == (10.0, 120.0)


def test_a_file_past_its_time_raises_with_the_file_scope() -> None:
    clock = StepClock()
    budget = TimeBudget(file_seconds=3, commit_seconds=100, clock=clock)

    with pytest.raises(OverBudgetError) as raised:
        _look(budget, 10, "a.yaml")

    assert raised.value.scope == "file"
    assert str(raised.value) == "reading and checking this file took more than its 3 s budget"


def test_what_a_file_spent_earlier_counts_against_its_allowance() -> None:
    clock = StepClock()
    budget = TimeBudget(file_seconds=5, commit_seconds=100, clock=clock)
    _look(budget, 1, "a.yaml")  # entering, this look and leaving: 3 steps on a.yaml
    _look(budget, 1, "b.yaml")  # another file has its own allowance
    _look(budget, 0, "a.yaml")  # 2 steps more: 5

    with pytest.raises(OverBudgetError):
        _look(budget, 0, "a.yaml")


def test_outside_a_file_only_the_commit_counts() -> None:
    clock = StepClock()
    budget = TimeBudget(file_seconds=1, commit_seconds=5, clock=clock)
    _look(budget, 2)

    with pytest.raises(OverBudgetError) as raised:
        _look(budget, 5)

    assert raised.value.scope == "commit"
    assert "the commit (stopped here)" in str(raised.value)


def test_the_first_place_given_is_kept() -> None:
    error = OverBudgetError("file", 10)

    first = budget_diagnostic(error, "a.yaml", 7, 3)

    assert budget_diagnostic(error, "b.yaml", 1, 1) is first
    assert first.format() == (
        "a.yaml:7:3: C6 reading and checking this file took more than its 10 s budget"
    )


# -- reading a file ------------------------------------------------------------------------------


def _many_nodes(count: int) -> str:
    return "items:\n" + "".join(f"  - {i}\n" for i in range(count))


def test_parsing_past_the_file_budget_is_one_diagnostic_at_the_place_reached() -> None:
    clock = StepClock()
    budget = TimeBudget(file_seconds=4, commit_seconds=1_000, clock=clock)

    with budget.file("big.yaml"):
        documents, problems = parse_yaml(_many_nodes(10_000), "big.yaml", budget=budget)

    assert documents == []
    assert len(problems) == 1
    problem = problems[0]
    assert (problem.rule, problem.path) == ("C6", "big.yaml")
    assert "took more than its 4 s budget" in problem.message
    # entering the file reads the clock twice (t=1, 2; deadline t=5), then every 1,024 nodes:
    # the fourth look (t=6, node 4,096: the root, the list, 4,094 items) is past the deadline
    assert (problem.line, problem.column) == (1 + 4_094, 5)


def test_the_commit_budget_running_out_while_parsing_is_raised_located() -> None:
    clock = StepClock()
    budget = TimeBudget(file_seconds=1_000, commit_seconds=3, clock=clock)

    with pytest.raises(OverBudgetError) as raised:
        parse_yaml(_many_nodes(10_000), "big.yaml", budget=budget)

    assert raised.value.scope == "commit"
    assert isinstance(raised.value.diagnostic, Diagnostic)
    assert raised.value.diagnostic.path == "big.yaml"
    assert raised.value.diagnostic.line > 1


def test_a_deep_nesting_scan_past_the_budget_is_located() -> None:
    clock = StepClock()
    budget = TimeBudget(file_seconds=2, commit_seconds=1_000, clock=clock)
    text = "- [x]\n" * 5_000  # scanned event by event (it might be deep), and it is long

    with budget.file("f.yaml"):
        _, problems = parse_yaml(text, "f.yaml", budget=budget)

    assert [p.rule for p in problems] == ["C6"]
    assert "budget" in problems[0].message
    assert problems[0].line > 1


def test_without_a_budget_nothing_reads_a_clock() -> None:
    documents, problems = parse_yaml(_many_nodes(5_000), "f.yaml")

    assert problems == []
    assert len(documents[0].data["items"]) == 5_000


# -- reading and validating a repo ---------------------------------------------------------------


def _unknown_fields(name: str, count: int) -> str:
    return (
        f"apiVersion: {API}\nkind: Runtime\nmetadata:\n  name: {name}\nspec:\n"
        "  channel: regular\n  cluster:\n    context: c\n"
        + "".join(f"  k{i:05d}: 1\n" for i in range(count))
    )


def test_a_file_too_slow_to_check_is_one_c6_diagnostic_and_the_rest_is_checked(
    make_repo: RepoFactory,
) -> None:
    files = {**small_repo(), "runtimes/slow.yaml": _unknown_fields("slow", 2_000)}
    files["runtimes/typo.yaml"] = _unknown_fields("typo", 1)
    repo = make_repo(files)
    options = ReadOptions(file_time_budget=500, commit_time_budget=10**6, clock=StepClock())

    validation = load_repo(repo, options)

    slow = [d for d in validation.diagnostics if d.path.endswith("slow.yaml")]
    assert [d.format() for d in slow] == [
        f"{repo}/runtimes/slow.yaml:1:1: C6 reading and checking this file took more than "
        "its 500 s budget"
    ]
    typo = [d.format() for d in validation.diagnostics if d.path.endswith("typo.yaml")]
    assert typo == [f"{repo}/runtimes/typo.yaml:9:3: C1 unknown field 'k00000' (/spec/k00000)"]
    assert validation.repo is None


def test_a_commit_past_its_budget_is_refused_with_one_diagnostic(make_repo: RepoFactory) -> None:
    files = small_repo()
    for n in range(30):
        files[f"runtimes/r{n:02d}.yaml"] = _unknown_fields(f"r{n:02d}", 0)
    repo = make_repo(files)
    options = ReadOptions(commit_time_budget=60, clock=StepClock())

    validation = load_repo(repo, options)

    assert validation.repo is None
    assert len(validation.diagnostics) == 1
    problem = validation.diagnostics[0]
    assert problem.rule == "C6"
    assert problem.message == (
        "reading and checking the commit (stopped here) took more than its 60 s budget"
    )
    assert problem.path.startswith(str(repo) + "/")
    assert problem.line >= 1


def test_a_commit_past_its_budget_while_validating_is_refused_with_one_diagnostic() -> None:
    documents, _ = parse_yaml(_unknown_fields("rt", 50), "runtimes/rt.yaml")
    raw = RawRepo(runtimes=(RawFile("runtimes/rt.yaml", tuple(documents)),))
    budget = TimeBudget(file_seconds=1_000, commit_seconds=20, clock=StepClock())

    validation = validate_repo(raw, SchemaChecker(load_schemas()), budget=budget)

    assert [d.format() for d in validation.diagnostics] == [
        "runtimes/rt.yaml:1:1: C6 reading and checking the commit (stopped here) took more "
        "than its 20 s budget"
    ]


def test_a_healthy_repo_is_valid_under_a_real_clock(make_repo: RepoFactory) -> None:
    validation = load_repo(make_repo(small_repo()))

    assert validation.diagnostics == ()


def test_the_sample_repo_reads_well_within_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root / "sample-repo")
    clock = StepClock(0.001)  # a thousandth of a second per look: work, not wall time

    validation = load_repo(".", ReadOptions(file_time_budget=1, clock=clock))

    assert validation.diagnostics == ()
    assert clock.reads < 1_000


def _work() -> None:
    """About half a second of CPU time on this machine (256 MiB hashed)."""
    block, digest = bytes(16 * 1024 * 1024), hashlib.sha256()
    for _ in range(16):
        digest.update(block)


def test_time_the_machine_spends_on_other_work_does_not_spend_a_budget() -> None:
    """The default clock is the reading thread's CPU time: while this thread waits for another
    one's work (a loaded machine, other replicas, other tests), its budget stays whole."""
    budget = ReadOptions(file_time_budget=0.05).time_budget()

    with budget.file("manifest.yaml"):
        other = threading.Thread(target=_work)
        other.start()
        other.join()  # waiting, no work of this thread's: a wall clock would be past 0.05 s
        budget.check()
    with budget.file("other.yaml"):
        _work()  # this thread's own work counts
        with pytest.raises(OverBudgetError):
            budget.check()
