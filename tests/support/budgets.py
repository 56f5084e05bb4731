"""Time budgets that are never spent, for tests on large real manifests (the prometheus-operator
corpus) that test what is accepted, not how fast: on a loaded machine, reading 4.5 MB of CRDs can
take longer than the 10 s a file may take, and such a test must not fail for it. The budgets
themselves are tested on a fake clock (tests/config/test_time_budget.py)."""

from __future__ import annotations

import pytest

from reconciler.config.budget import TimeBudget
from reconciler.source.loader import ReadOptions


def _never_spent(options: ReadOptions) -> TimeBudget:
    """``options``' budgets on a clock that never moves."""
    return TimeBudget(options.file_time_budget, options.commit_time_budget, lambda: 0.0)


def budgets_never_spent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every read of a repo in this test (the loader's, ``validate``'s, ``render``'s, ``sync``'s
    in this process) runs its time budgets on a clock that stands still."""
    monkeypatch.setattr(ReadOptions, "time_budget", _never_spent)
