"""The last guard of S4 (reconciler.core.redaction): secret shapes masked in diagnostics, daemon log
lines and ``/status``, whatever made the text."""

from __future__ import annotations

import io
import json
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.core.diagnostics import Diagnostic
from reconciler.core.redaction import mask, mask_all, token_kind
from reconciler.daemon.logs import JsonFormatter, MaskingFilter
from reconciler.daemon.service import Daemon
from reconciler.operations.store import SqliteStore
from tests.support.credentials import GITHUB, TOKENS
from tests.support.sources import UnusedSource

#: The shapes a single string shows (a PEM block and an htpasswd line are the scan's own).
SHAPES = [t for t in TOKENS if t[0] not in ("a PEM private key", "an htpasswd entry")]


@pytest.mark.parametrize(("what", "token", "look_alike"), SHAPES, ids=[t[0] for t in SHAPES])
def test_mask_hides_each_token_shape_and_keeps_look_alikes(
    what: str, token: str, look_alike: str
) -> None:
    masked = mask(f"before {token} after")

    assert token_kind(token) == what
    assert token not in masked
    assert masked.startswith("before ")
    assert masked.endswith(" after")
    assert "***" in masked
    assert token_kind(look_alike) is None
    if "@" not in look_alike:  # any user in a URL is masked (ssh://***@github.com/...)
        assert mask(f"before {look_alike} after") == f"before {look_alike} after"


def test_mask_keeps_what_says_which_credential_it_was() -> None:
    assert mask("Authorization: Bearer 4f7a2c1e9b8d6f3a0c5e7b9d") == "Authorization: Bearer ***"
    assert mask("see https://user:pw@git.example.com/x") == "see https://***@git.example.com/x"
    assert mask("ssh://git@github.com/o/r and https://tok@h/x") == (
        "ssh://***@github.com/o/r and https://***@h/x"
    )


def test_mask_all_reaches_keys_and_nested_values() -> None:
    document = {"a": [f"x {GITHUB}", 3, None, {GITHUB: True}], "b": {"c": "fine"}}

    assert mask_all(document) == {"a": ["x ***", 3, None, {"***": True}], "b": {"c": "fine"}}


def test_a_diagnostic_never_holds_a_token_whatever_made_it() -> None:
    found = Diagnostic(
        f"runtimes/{GITHUB}.yaml", 3, 5, "C1", f"unknown field '{GITHUB}'", f"/spec/{GITHUB}"
    )

    assert GITHUB not in found.format()
    assert GITHUB not in json.dumps(found.to_json())
    assert found.format() == "runtimes/***.yaml:3:5: C1 unknown field '***' (/spec/***)"


def test_log_lines_are_masked_in_text_and_json() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(MaskingFilter())
    logger = logging.getLogger("tests.redaction")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("fetching %s failed", f"https://x-access-token:{GITHUB}@github.com/o/r")
    finally:
        logger.removeHandler(handler)

    line = json.loads(stream.getvalue())
    assert line["message"] == "fetching https://***@github.com/o/r failed"


def test_status_is_masked(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db")
    daemon = Daemon(UnusedSource(), store, None, lambda: datetime.now(UTC))  # type: ignore[arg-type]
    try:
        daemon.state.unreachable(f"the API server said: Bearer {GITHUB} is not allowed")

        status = json.dumps(daemon.status())
    finally:
        daemon.close()

    assert GITHUB not in status
    assert "Bearer ***" in status
