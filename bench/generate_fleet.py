"""The command line of tests/support/fleet_generator.py: a large, valid config repo of N runtimes
over M modules with V versions each (what it writes, ``--corrupt`` and ``--overrides``: that
module's docstring and bench/README.md).

    python bench/generate_fleet.py bench/out/fleet --runtimes 10000 [--corrupt 12] [--overrides 0.3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.fleet_generator import generate_fleet


def main(argv: list[str] | None = None) -> int:
    """Command line; see the module docstring."""
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        epilog="Deterministic for a seed. Refuses to replace a folder it did not write.",
    )
    parser.add_argument("out", type=Path, help="folder to write (a fleet there is replaced)")
    parser.add_argument("--runtimes", type=int, required=True, help="number of runtimes")
    parser.add_argument("--modules", type=int, default=10, help="number of modules (10)")
    parser.add_argument("--versions", type=int, default=3, help="versions per module (3)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (1)")
    parser.add_argument("--corrupt", type=int, default=0, help="plant this many mistakes (0)")
    parser.add_argument(
        "--overrides", type=float, default=0.0, help="fraction of runtimes with a config (0)"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        planted = generate_fleet(
            args.out,
            args.runtimes,
            args.modules,
            args.versions,
            args.seed,
            args.corrupt,
            args.overrides,
        )
    except (FileExistsError, ValueError) as error:
        parser.exit(2, f"error: {error}\n")
    elapsed = time.perf_counter() - started
    print(
        f"wrote {args.out}: {args.runtimes} runtimes, {args.modules} modules x "
        f"{args.versions} versions, {len(planted)} mistakes, in {elapsed:.2f}s"
    )
    for corruption in planted:
        print(f"  {corruption.rule} {corruption.path}: {corruption.kind} ({corruption.detail})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
