"""How soon a command says something: seconds to its first line (standard output and error
together, as a terminal shows them), and in all, over a few runs (issue 43, point 5).

    python bench/first_line_bench.py --runs 3 -- reconciler sync bench/out/scale-fleet-5000 \\
        --snapshot bench/out/scale-cl-5000/

Each run is a fresh process, as a user starts it; the first line is printed with its time.
``--first-only`` stops each run after its first line (Ctrl-C, SIGINT: a sync stops as a user
stops it), for a command whose first line is all that is measured.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import time


def timed_run(command: list[str], first_only: bool = False) -> tuple[float, float, str]:
    """One run of ``command``: seconds to its first line, seconds in all (stopped by SIGINT
    after that line with ``first_only``), and that line."""
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    first = process.stdout.readline()
    first_at = time.monotonic() - start
    if first_only:
        process.send_signal(signal.SIGINT)
    for _ in process.stdout:  # drain, as a terminal would
        pass
    process.wait()
    return first_at, time.monotonic() - start, first.rstrip("\n")


def main(argv: list[str] | None = None) -> int:
    """Command line; see the module docstring."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs (3)")
    parser.add_argument(
        "--first-only", action="store_true", help="stop each run after its first line"
    )
    parser.add_argument("command", nargs="+", help="the command, after --")
    args = parser.parse_args(argv)
    firsts, totals = [], []
    for _ in range(args.runs):
        first_at, total, line = timed_run(args.command, args.first_only)
        firsts.append(first_at)
        totals.append(total)
        print(f"first line after {first_at:.2f} s, done after {total:.2f} s: {line[:100]}")
    print(
        f"median of {args.runs}: first line {statistics.median(firsts):.2f} s, "
        f"in all {statistics.median(totals):.2f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
