"""The schemas' compiled fast checks kept on disk (``reconciler.source.schemas``): compiled once
per machine and read back by the next checker; a damaged file or a folder that cannot be written
costs a compile, never a wrong verdict."""

from __future__ import annotations

import marshal
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.source.schemas import schema_checker
from tests.support.fleet_history import runtime_yaml

VALID: dict[str, Any] = yaml.safe_load(runtime_yaml("a", "regular", "[{name: widget}]"))
INVALID: dict[str, Any] = {**VALID, "spec": {**VALID["spec"], "chanel": "regular"}}


def _verdicts(cache: Path) -> tuple[bool, bool]:
    checker = schema_checker(cache)
    return checker.is_valid("Runtime", VALID), checker.is_valid("Runtime", INVALID)


def test_the_compiled_check_is_kept_and_read_back_by_the_next_checker(tmp_path: Path) -> None:
    cache = tmp_path / "schemas"

    assert _verdicts(cache) == (True, False)
    (kept,) = cache.iterdir()
    # another check under the same name proves the next checker runs the file, not a compile
    planted = "def validate_planted(data):\n    raise LookupError('read from the cache')\n"
    kept.write_bytes(marshal.dumps(("validate_planted", compile(planted, "planted", "exec"))))
    with pytest.raises(LookupError, match="read from the cache"):
        schema_checker(cache).is_valid("Runtime", VALID)


@pytest.mark.parametrize("damage", [b"", b"not marshal", marshal.dumps(("x", 42))])
def test_a_damaged_file_is_compiled_again_and_replaced(tmp_path: Path, damage: bytes) -> None:
    cache = tmp_path / "schemas"
    _verdicts(cache)
    (kept,) = cache.iterdir()
    good = kept.read_bytes()
    kept.write_bytes(damage)

    assert _verdicts(cache) == (True, False)
    assert kept.read_bytes() == good
    assert [p.name for p in cache.iterdir()] == [kept.name]  # no temporary file left


def test_a_cache_folder_that_cannot_be_written_only_goes_unused(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("in the way\n")

    assert _verdicts(blocked / "schemas") == (True, False)
    assert _verdicts(blocked / "schemas") == (True, False)
