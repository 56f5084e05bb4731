"""The console script collects cyclic garbage in bigger batches than Python's default.

Reading a repo allocates many containers and few cycles; with the default threshold the
collector runs every 700 allocations and rescans the older objects often (bench/README.md,
"Whole processes against one C-loader process"). Checked in a fresh interpreter: the threshold is
process-wide.
"""

from __future__ import annotations

import json
import subprocess
import sys

from reconciler.cli import GC_THRESHOLD

_PROBE = """
import gc, json, sys
from reconciler.cli import main
try:
    main(["--version"])
except SystemExit:
    pass
print(json.dumps(gc.get_threshold()), file=sys.stderr)
"""


def test_main_raises_the_youngest_generations_threshold_only() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True
    )
    default = subprocess.run(
        [sys.executable, "-c", "import gc; print(list(gc.get_threshold()))"],
        capture_output=True,
        text=True,
        check=True,
    )
    threshold = json.loads(done.stderr.strip().splitlines()[-1])
    assert threshold == [GC_THRESHOLD, *json.loads(default.stdout)[1:]]
    assert json.loads(default.stdout)[0] < GC_THRESHOLD
