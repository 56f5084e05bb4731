"""Hostile YAML benchmark: the corpus of ``tests/support/hostile_corpus.py``, and the cost of
locating many diagnostics.

1. **Corpus**: every generated hostile file read as a commit (``load_repo``) in worker processes;
   prints the corpus size, how many files were accepted or refused, crashes (a worker killed by
   a signal), tracebacks, hangs, files stopped by their time budget, and the slowest files.
2. **Locating**: a runtime with N unknown fields under ``spec`` (each one diagnostic with its line
   and column), validated in a fresh process; N = 10,000, 40,000 (520 KB) and 340,000 (4.4 MB).
   Time budgets are lifted here (when the code has them) so the figures are the work itself.

``--code DIR`` runs both against another checkout's ``reconciler`` package (e.g. the commit
before the fix: ``git archive <rev> reconciler schemas | tar -x -C DIR``); runs past
``--timeout`` seconds are reported as such. Results: ``bench/out/hostile_yaml.json``.

    python bench/hostile_yaml_bench.py [--code DIR] [--skip-corpus] [--sizes 10000,40000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.hostile_corpus import Run, corpus, run_corpus, summary  # noqa: E402

LOCATE_CHILD = """\
import sys, time
sys.path.insert(0, {code!r})
sys.path.insert(1, {root!r})
from tests.support.hostile_corpus import MemoryTree, base_files
from reconciler.source.loader import ReadOptions, load_repo
n = {n}
text = (
    "apiVersion: reconciler.dev/v1alpha1\\nkind: Runtime\\nmetadata:\\n  name: rt\\nspec:\\n"
    "  channel: regular\\n  cluster:\\n    inCluster: true\\n"
    + "".join(f"  k{{i:06d}}: 1\\n" for i in range(n))
)
fields = getattr(ReadOptions, "__dataclass_fields__", {{}})
budgets = {{"file_time_budget": 1e9, "commit_time_budget": 1e9}}
options = ReadOptions(**budgets) if "file_time_budget" in fields else None
tree = MemoryTree({{**base_files(), "runtimes/rt.yaml": text.encode()}})
started = time.perf_counter()
validation = load_repo("repo", options, tree=tree)
print(len(text), len(validation.diagnostics), time.perf_counter() - started)
"""


def locate(code: Path, n: int, timeout: float) -> dict[str, Any]:
    """Validate a runtime with ``n`` unknown fields in a fresh process."""
    script = LOCATE_CHILD.format(code=str(code), root=str(ROOT), n=n)
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"unknown_fields": n, "seconds": None, "note": f"over {timeout:g} s, stopped"}
    if done.returncode != 0:
        return {"unknown_fields": n, "seconds": None, "note": done.stderr[-300:]}
    size, diagnostics, seconds = done.stdout.split()
    return {
        "unknown_fields": n,
        "bytes": int(size),
        "diagnostics": int(diagnostics),
        "seconds": float(seconds),
        "process_seconds": time.perf_counter() - started,
    }


def corpus_report(run: Run) -> dict[str, Any]:
    """Run the corpus and print what happened."""
    cases = corpus(run.seed)
    started = time.perf_counter()
    outcomes = run_corpus(run)
    report = summary(outcomes, cases)
    report["wall_seconds"] = time.perf_counter() - started
    report["failures"] = [
        {"name": o.name, "crash": o.crash, "error": (o.error or "")[-300:]}
        for o in outcomes
        if o.crash is not None or o.error is not None
    ]
    report["slowest_files"] = [
        {"name": o.name, "seconds": round(o.seconds, 3)}
        for o in sorted(outcomes, key=lambda o: -o.seconds)[:8]
    ]
    print(
        f"corpus: {report['files']:,} files ({report['bytes'] / 1e6:.1f} MB): "
        f"{report['accepted']:,} accepted, {report['refused']:,} refused, "
        f"{report['crashes']} crashes or hangs, {report['tracebacks']} tracebacks, "
        f"{report['over_budget']} stopped by their time budget; "
        f"{report['wall_seconds']:.1f} s wall, {report['total_seconds']:.1f} s reading"
    )
    for failure in report["failures"][:30]:
        print(f"  FAILED {failure['name']}: {failure['crash'] or failure['error'][-160:]}")
    for slow in report["slowest_files"]:
        print(f"  slow {slow['seconds']:7.3f} s  {slow['name']}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout whose code to run")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--file-budget", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=600.0, help="per locate run")
    parser.add_argument("--case-timeout", type=float, default=120.0, help="per corpus file")
    parser.add_argument("--sizes", default="10000,40000,340000")
    parser.add_argument("--skip-corpus", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "hostile_yaml.json")
    args = parser.parse_args(argv)
    code = args.code.resolve()
    results: dict[str, Any] = {"code": str(code)}
    if not args.skip_corpus:
        run = Run(
            workers=args.workers,
            file_budget=args.file_budget,
            case_timeout=args.case_timeout,
            code=None if code == ROOT else code,
        )
        results["corpus"] = corpus_report(run)
    results["locate"] = []
    for n in (int(s) for s in args.sizes.split(",") if s):
        found = locate(code, n, args.timeout)
        results["locate"].append(found)
        seconds = found["seconds"]
        shown = f"{seconds:.2f} s" if seconds is not None else found["note"]
        print(f"locate: {n:,} unknown fields ({found.get('bytes', 0) / 1e3:,.0f} KB): {shown}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
