"""Validation benchmark: a generated fleet validated cold, ours against the naive baseline.

Each measurement is a fresh Python process (imports included) timed from start to exit. On a
corrupted copy of the fleet both implementations must report the same, non-empty set of errors,
and every planted mistake must be found in its file.

    python bench/validate_bench.py --runtimes 10000
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.generate_fleet import generate_fleet  # noqa: E402

OURS = "from reconciler.loader import load_repo as load"
NAIVE = "from bench.naive import load_repo_naive as load"
CHILD = """
import json, sys
sys.path.insert(0, {root!r})
{loader}
from pathlib import Path
validation = load(Path({repo!r}))
print(json.dumps([d.format() for d in validation.diagnostics]))
"""


def run_cold(loader: str, repo: Path) -> tuple[float, list[str]]:
    """Seconds for one fresh process to validate ``repo``, and the errors it printed."""
    code = CHILD.format(root=str(ROOT), loader=loader, repo=str(repo))
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    elapsed = time.perf_counter() - started
    errors: list[str] = json.loads(done.stdout)
    return elapsed, errors


def fleet(workdir: Path, runtimes: int, corrupt: int) -> Path:
    """The generated fleet, made once per size and corruption count."""
    repo = workdir / f"fleet-{runtimes}-c{corrupt}"
    stamp = repo / ".generated"
    if not stamp.exists():
        generate_fleet(repo, runtimes, corrupt=corrupt)
        stamp.write_text("ok", encoding="utf-8")
    return repo


def measure(loader: str, repo: Path, repeat: int) -> list[float]:
    """``repeat`` cold timings of ``loader`` on ``repo``."""
    return [run_cold(loader, repo)[0] for _ in range(repeat)]


def compare_errors(repo: Path) -> dict[str, object]:
    """Both implementations on the corrupted ``repo``: same errors, every mistake found."""
    _, ours = run_cold(OURS, repo)
    _, naive = run_cold(NAIVE, repo)
    planted = json.loads((repo / ".corruptions.json").read_text(encoding="utf-8"))
    missed = [p for p in planted if not any(f"/{p['path']}:" in e for e in ours)]
    return {
        "errors": len(ours),
        "planted": len(planted),
        "same_errors": sorted(ours) == sorted(naive) and bool(ours),
        "missed": missed,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table; results also go to ``<workdir>/validate.json``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtimes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, help="cold runs of ours")
    parser.add_argument("--naive-repeat", type=int, default=1, help="cold runs of the baseline")
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args(argv)
    repo = fleet(args.workdir, args.runtimes, 0)
    ours = measure(OURS, repo, args.repeat)
    naive = measure(NAIVE, repo, args.naive_repeat)
    check = compare_errors(fleet(args.workdir, args.runtimes, 12))
    result = {
        "runtimes": args.runtimes,
        "ours_best_s": min(ours),
        "ours_median_s": statistics.median(ours),
        "naive_best_s": min(naive),
        "ratio": min(naive) / min(ours),
        "ours_per_runtime_us": min(ours) / args.runtimes * 1e6,
        "naive_per_runtime_us": min(naive) / args.runtimes * 1e6,
        **check,
    }
    for key, value in result.items():
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        print(f"{key:22} {shown}")
    args.workdir.mkdir(parents=True, exist_ok=True)
    (args.workdir / "validate.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    ok = result["same_errors"] and not result["missed"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
