"""Generates a large, valid config repo (the command line of tests/support/fleet_generator.py): N
runtimes over M modules with V versions each.

Used by the benchmarks (cold validation of 10,000 runtimes; the daemon and fleet diffs over
1,000 runtimes x 10 modules). The layout is that of DESIGN.md §2, with the channels inside the
repo (``channels/``). Deterministic for a seed: the same arguments write the same bytes.

``--corrupt K`` plants K distinct mistakes, each in its own place (a runtime, a channel entry or a
module), cycling through twelve kinds (unknown field, unknown channel, unknown module, pin to a
missing version, name/file mismatch, duplicate key, wrong type, bad enum value, a channel mapping
a missing module or a missing version, an unknown field or an unknown dependency in a module),
and lists them in ``<out>/.corruptions.json`` (file, kind, rule expected, what was changed).
Each mistake gives exactly one diagnostic, in its file.

``--overrides F`` gives a fraction F of the runtimes a ``config`` override on one of their
modules (and the ``regular`` channel a fleet-wide one), leaving everything else byte for byte as
without it: the overrides come from a random generator of their own.

``<out>/.fleet.json`` records the arguments (and a digest of this generator): the benchmarks
reuse a fleet only when it matches, and the generator only ever replaces a folder that has it.

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
