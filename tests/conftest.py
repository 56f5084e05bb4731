"""Shared test setup: every test gets its own state store (never the user's)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_state_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECONCILER_STATE", f"sqlite:///{tmp_path / 'state' / 'state.db'}")
