"""Fleet diff benchmark: a channel bump in a generated fleet, diffed between two revisions.

Generates a fleet (default 1,000 runtimes x 10 modules) in a git repository, commits it, bumps
one module in the `regular` channel, and times the whole command
`reconciler diff REPO --base HEAD` in fresh processes (imports included), with the split of
its phases (`--timings`). Checks that repeated runs print byte-identical output.

    python bench/fleetdiff_bench.py --runtimes 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.generate_fleet import generate_fleet  # noqa: E402

GIT = ["git", "-c", "user.email=bench@example.io", "-c", "user.name=bench"]


def prepare(workdir: Path, runtimes: int, modules: int) -> Path:
    """A git repository whose HEAD is the generated fleet and whose working tree bumps one
    module of the `regular` channel (1.0.0 -> 1.1.0)."""
    repo = workdir / f"fleetdiff-{runtimes}x{modules}"
    if repo.exists():
        shutil.rmtree(repo)
    generate_fleet(repo, runtimes, modules=modules)
    subprocess.run([*GIT, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-qm", "fleet"], cwd=repo, check=True)
    channel = repo / "channels" / "regular.yaml"
    channel.write_text(channel.read_text().replace("mod-03: 1.0.0", "mod-03: 1.1.0"))
    return repo


def run_once(repo: Path, output_format: str) -> tuple[float, str, str]:
    """Seconds of one cold run, its stdout and its timings line."""
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "reconciler",
            "diff",
            str(repo),
            "--base",
            "HEAD",
            "--format",
            output_format,
            "--timings",
            "--now",
            "2026-11-20T10:00",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1, 3):
        raise SystemExit(f"diff failed ({done.returncode}): {done.stderr[-2000:]}")
    timings = next((line for line in done.stderr.splitlines() if line.startswith("timings:")), "")
    return elapsed, done.stdout, timings


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; results also go to ``<workdir>/fleetdiff.json``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtimes", type=int, default=1000)
    parser.add_argument("--modules", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args(argv)
    repo = prepare(args.workdir, args.runtimes, args.modules)
    results: dict[str, object] = {"runtimes": args.runtimes, "modules": args.modules}
    for output_format in ("text", "markdown", "json"):
        runs = [run_once(repo, output_format) for _ in range(args.repeat)]
        seconds = [r[0] for r in runs]
        digests = {hashlib.sha256(r[1].encode()).hexdigest() for r in runs}
        results[output_format] = {
            "best_s": min(seconds),
            "median_s": statistics.median(seconds),
            "identical_output": len(digests) == 1,
            "output_chars": len(runs[0][1]),
            "phases": runs[seconds.index(min(seconds))][2],
        }
    print(json.dumps(results, indent=2))
    (args.workdir / "fleetdiff.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
