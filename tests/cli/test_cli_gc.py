"""The console script collects cyclic garbage in bigger batches than Python's default.

Reading a repo allocates many containers and few cycles; with the default threshold the
collector runs every 700 allocations and rescans the older objects often, and once more over
everything at exit (frozen instead) (bench/README.md,
"Whole processes against one C-loader process"). Checked in a fresh interpreter: the threshold is
process-wide.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from reconciler.cli import GC_THRESHOLD, main

_PROBE = """
import gc, json, sys
from reconciler.cli import main
sys.argv = ["reconciler", "--version"]
try:
    main()
except SystemExit:
    pass
print(json.dumps([*gc.get_threshold(), gc.get_freeze_count()]), file=sys.stderr)
"""


def test_main_raises_the_youngest_generations_threshold_and_freezes_at_exit() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True
    )
    default = subprocess.run(
        [sys.executable, "-c", "import gc; print(list(gc.get_threshold()))"],
        capture_output=True,
        text=True,
        check=True,
    )
    *threshold, frozen = json.loads(done.stderr.strip().splitlines()[-1])
    assert threshold == [GC_THRESHOLD, *json.loads(default.stdout)[1:]]
    assert frozen > 0  # at exit: the last collection skips what the command built
    assert json.loads(default.stdout)[0] < GC_THRESHOLD


def test_main_called_with_arguments_leaves_the_callers_collector_alone() -> None:
    import gc

    before = (gc.get_threshold(), gc.get_freeze_count())
    with pytest.raises(SystemExit):
        main(["--version"])
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
