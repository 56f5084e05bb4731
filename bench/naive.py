"""The naive baseline of the validation benchmark, from the command line (the loader itself is
tests/support/naive_loader.py).

    python bench/naive.py REPO      # prints the errors like ``reconciler validate``, and the time
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.naive_loader import load_repo_naive


def main(argv: list[str] | None = None) -> int:
    """``python bench/naive.py REPO``: exit 0 valid, 1 invalid."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python bench/naive.py REPO", file=sys.stderr)
        return 2
    started = time.perf_counter()
    validation = load_repo_naive(args[0])
    elapsed = time.perf_counter() - started
    for diagnostic in validation.diagnostics:
        print(diagnostic.format())
    state = "valid" if validation.valid else f"{len(validation.diagnostics)} errors"
    print(f"{args[0]}: {state}, {validation.files} files, {elapsed:.2f}s", file=sys.stderr)
    return 0 if validation.valid else 1


if __name__ == "__main__":
    raise SystemExit(main())
