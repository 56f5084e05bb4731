"""Validation benchmark: a generated fleet validated cold, ours against the naive baseline.

Each measurement is a fresh Python process (interpreter start and imports included), timed by
this script from process start to exit:

- ``ours (CLI)``: ``reconciler validate REPO``, the installed console script;
- ``ours (load_repo)``: ``python -c`` importing :func:`reconciler.source.loader.load_repo` and
validating;
  the child also prints its own in-process time of the ``load_repo`` call;
- ``naive``: the same with :func:`tests.support.naive_loader.load_repo_naive` (pure-Python YAML
parser, a
  ``jsonschema.validate()``-style check per document).

Then, on a corrupted copy of the fleet (``--corrupt`` mistakes planted by the generator), all three
must report the same, non-empty list of errors, and every planted mistake must be reported in its
file, by its rule, with no error anywhere else. The acceptance point is checked at the end (cold
time under ``--max-seconds``, at least ``--min-ratio`` times faster than the baseline); the exit
status is 0 only when everything holds. Results are also written to ``<workdir>/validate.json``.

    python bench/validate_bench.py --runtimes 10000 --repeat 3

``--overrides F`` measures instead what ``config`` overrides cost (rule C8): the same fleet with
and without a ``config`` on a fraction F of its runtimes, ``load_repo`` cold, interleaved; the
acceptance is a median ratio of at most ``--max-override-ratio`` (1.3).

    python bench/validate_bench.py --runtimes 10000 --repeat 5 --overrides 0.3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reconciler.core.diagnostics import Diagnostic  # noqa: E402
from tests.support.fleet_generator import (  # noqa: E402
    CORRUPTIONS,
    MARKER,
    fleet_parameters,
    generate_fleet,
)

OURS = "from reconciler.source.loader import load_repo as load"
NAIVE = "from tests.support.naive_loader import load_repo_naive as load"
CHILD = """\
import time
started = time.perf_counter()
import json, sys
sys.path.insert(0, {root!r})
{loader}
imported = time.perf_counter()
validation = load({repo!r})
loaded = time.perf_counter()
print(json.dumps({{
    "import_s": imported - started,
    "load_s": loaded - imported,
    "valid": validation.valid,
    "files": validation.files,
    "runtimes": len(validation.repo.runtimes) if validation.repo is not None else 0,
    "errors": [d.format() for d in validation.diagnostics],
    "places": [[d.path, d.rule] for d in validation.diagnostics],
}}))
"""


@dataclass
class Series:
    """Timings of one way of validating, in seconds."""

    name: str
    wall: list[float] = field(default_factory=list)
    in_process: list[float] = field(default_factory=list)

    def summary(self, runtimes: int) -> dict[str, Any]:
        """Best, median and per-runtime cost, as written to the JSON results."""
        result: dict[str, Any] = {
            "runs": len(self.wall),
            "wall_s": self.wall,
            "best_s": min(self.wall),
            "median_s": statistics.median(self.wall),
            "per_runtime_us": min(self.wall) / max(runtimes, 1) * 1e6,
        }
        if self.in_process:
            result["load_repo_s"] = self.in_process
            result["load_repo_best_s"] = min(self.in_process)
            result["load_repo_median_s"] = statistics.median(self.in_process)
        return result


# -- running ---------------------------------------------------------------------------------


def console_script() -> str:
    """The installed ``reconciler`` command of this interpreter's environment."""
    beside = Path(sys.executable).parent / "reconciler"
    found = str(beside) if beside.is_file() else shutil.which("reconciler")
    if found is None:
        raise SystemExit("the reconciler console script is not installed (pip install -e .)")
    return found


def run_child(loader: str, repo: Path) -> tuple[float, dict[str, Any]]:
    """Seconds for a fresh ``python -c`` process to import ``loader`` and validate ``repo``,
    and what the child reported (its in-process times, verdict and errors)."""
    code = CHILD.format(root=str(ROOT), loader=loader, repo=str(repo))
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=ROOT
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"child failed ({done.returncode}):\n{done.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    return elapsed, report


def run_cli(repo: Path, *, as_json: bool = False) -> tuple[float, int, list[str]]:
    """Seconds for ``reconciler validate repo`` from start to exit, its exit status and (with
    ``as_json``) its errors formatted as the text output prints them."""
    command = [console_script(), "validate", str(repo)]
    if as_json:
        command += ["--format", "json"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"reconciler validate failed ({done.returncode}):\n{done.stderr}")
    errors: list[str] = []
    if as_json:
        errors = [Diagnostic(**e).format() for e in json.loads(done.stdout)["errors"]]
    return elapsed, done.returncode, errors


def fleet(workdir: Path, parameters: dict[str, Any]) -> tuple[Path, float | None]:
    """The generated fleet for ``parameters``, reused when its marker matches; and the
    generation time when it was (re)generated now."""
    p = parameters
    name = f"fleet-r{p['runtimes']}-m{p['modules']}-v{p['versions']}-s{p['seed']}-c{p['corrupt']}"
    name += f"-o{p['overrides']}" if p.get("overrides") else ""
    repo = workdir / name
    marker = repo / MARKER
    expected = fleet_parameters(**parameters)
    if marker.is_file() and json.loads(marker.read_text(encoding="utf-8")) == expected:
        return repo, None
    started = time.perf_counter()
    generate_fleet(repo, **parameters)
    return repo, time.perf_counter() - started


# -- the benchmark ---------------------------------------------------------------------------


def measure(repo: Path, runtimes: int, repeat: int, naive_repeat: int) -> list[Series]:
    """Cold timings on the valid fleet; ours interleaved (CLI, load_repo) so that a slow
    moment of the machine does not hit one of them only."""
    cli, ours, naive = (
        Series("ours: reconciler validate"),
        Series("ours: load_repo"),
        Series("naive"),
    )
    for _ in range(repeat):
        elapsed, status, _ = run_cli(repo)
        if status != 0:
            raise RuntimeError(f"{repo} is not valid: reconciler validate exited {status}")
        cli.wall.append(elapsed)
        elapsed, report = run_child(OURS, repo)
        _expect_valid(report, runtimes, "ours")
        ours.wall.append(elapsed)
        ours.in_process.append(report["load_s"])
    for _ in range(naive_repeat):
        elapsed, report = run_child(NAIVE, repo)
        _expect_valid(report, runtimes, "naive")
        naive.wall.append(elapsed)
        naive.in_process.append(report["load_s"])
    return [cli, ours, naive]


def _expect_valid(report: dict[str, Any], runtimes: int, who: str) -> None:
    if not report["valid"] or report["runtimes"] != runtimes:
        raise RuntimeError(f"{who}: the fleet should be valid: {report['errors'][:5]}")


def compare_errors(repo: Path) -> dict[str, Any]:
    """All three on the corrupted ``repo``: the same errors, and every planted mistake found
    in its file by its rule."""
    _, _, cli = run_cli(repo, as_json=True)
    _, ours = run_child(OURS, repo)
    _, naive = run_child(NAIVE, repo)
    errors: list[str] = ours["errors"]
    places = {(path, rule) for path, rule in ours["places"]}
    planted = json.loads((repo / CORRUPTIONS).read_text(encoding="utf-8"))
    expected = {os.path.normpath(repo / c["path"]): c for c in planted}
    missed = [c for c in planted if (os.path.normpath(repo / c["path"]), c["rule"]) not in places]
    unexpected = [
        e for e, (path, _) in zip(errors, ours["places"], strict=True) if path not in expected
    ]
    return {
        "corrupted_repo": str(repo),
        "planted": len(planted),
        "errors_ours": len(errors),
        "errors_cli": len(cli),
        "errors_naive": len(naive["errors"]),
        "same_errors": bool(errors) and errors == naive["errors"] == cli,
        "found": len(planted) - len(missed),
        "missed": missed,
        "unexpected": unexpected,
        "errors": errors,
    }


# -- output ----------------------------------------------------------------------------------


def table(rows: list[list[str]]) -> str:
    """Rows as aligned columns, the first row a header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def _s(seconds: float) -> str:
    return f"{seconds:.2f} s"


def report(result: dict[str, Any], series: list[Series]) -> str:
    """The human-readable results."""
    runtimes = result["fleet"]["runtimes"]
    generated = result["generation_s"]
    made = f"generated in {generated:.2f} s" if generated is not None else "reused"
    rows = [["measurement (cold, fresh process)", "runs", "best", "median", "per runtime"]]
    for one in series:
        summary = one.summary(runtimes)
        rows.append(
            [
                one.name + " (wall)",
                str(summary["runs"]),
                _s(summary["best_s"]),
                _s(summary["median_s"]),
                f"{summary['per_runtime_us']:.0f} µs",
            ]
        )
        if one.in_process:
            best = summary["load_repo_best_s"]
            rows.append(
                [
                    "  in the child: the load_repo() call alone",
                    str(summary["runs"]),
                    _s(best),
                    _s(summary["load_repo_median_s"]),
                    f"{best / max(runtimes, 1) * 1e6:.0f} µs",
                ]
            )
    check = result["corrupted"]
    ratio = result["ratio"]
    lines = [
        f"fleet: {result['repo']} ({runtimes} runtimes, {result['files']} files; {made})",
        "",
        table(rows),
        "",
        f"ratio naive / ours (CLI):       {ratio['cli_best']:.1f}x best, "
        f"{ratio['cli_median']:.1f}x median",
        f"ratio naive / ours (load_repo): {ratio['load_repo_best']:.1f}x best, "
        f"{ratio['load_repo_median']:.1f}x median",
        "",
        f"corrupted copy: {check['corrupted_repo']}",
        f"  errors: CLI {check['errors_cli']}, load_repo {check['errors_ours']}, "
        f"naive {check['errors_naive']}; identical: {'yes' if check['same_errors'] else 'NO'}",
        f"  planted mistakes found in their file by their rule: {check['found']} of "
        f"{check['planted']}; errors elsewhere: {len(check['unexpected'])}",
        *(f"  MISSED {c['rule']} {c['path']}: {c['kind']}" for c in check["missed"]),
        *(f"  UNEXPECTED {e}" for e in check["unexpected"]),
        "",
        "acceptance:",
        *(f"  {'PASS' if ok else 'FAIL'}  {what}" for what, ok in result["acceptance"].items()),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the results, write ``<workdir>/validate.json``."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runtimes", type=int, default=10_000, help="fleet size (10000)")
    parser.add_argument("--modules", type=int, default=10, help="modules (10)")
    parser.add_argument("--versions", type=int, default=3, help="versions per module (3)")
    parser.add_argument("--seed", type=int, default=1, help="generator seed (1)")
    parser.add_argument("--repeat", type=int, default=3, help="cold runs of ours (3)")
    parser.add_argument("--naive-repeat", type=int, default=1, help="cold runs of naive (1)")
    parser.add_argument("--corrupt", type=int, default=12, help="mistakes in the copy (12)")
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--max-seconds", type=float, default=5.0, help="acceptance (5.0)")
    parser.add_argument("--min-ratio", type=float, default=20.0, help="acceptance (20)")
    parser.add_argument(
        "--overrides", type=float, default=0.0, help="measure overrides on this fraction"
    )
    parser.add_argument(
        "--max-override-ratio", type=float, default=1.3, help="acceptance of --overrides (1.3)"
    )
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.naive_repeat < 1 or args.corrupt < 1:
        parser.error("--repeat, --naive-repeat and --corrupt must be at least 1")
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    sizes = {
        "runtimes": args.runtimes,
        "modules": args.modules,
        "versions": args.versions,
        "seed": args.seed,
    }
    if args.overrides:
        return overrides_main(args, sizes, workdir)
    repo, generation = fleet(workdir, {**sizes, "corrupt": 0})
    corrupted, _ = fleet(workdir, {**sizes, "corrupt": args.corrupt})
    made = "reused" if generation is None else f"generated in {generation:.2f} s"
    _progress(f"fleet {repo}: {made}; measuring (the naive run takes a while)")
    series = measure(repo, args.runtimes, args.repeat, args.naive_repeat)
    cli, ours, naive = (s.summary(args.runtimes) for s in series)
    _progress(f"comparing errors on {corrupted}")
    check = compare_errors(corrupted)
    ratio = {
        "cli_best": naive["best_s"] / cli["best_s"],
        "cli_median": naive["median_s"] / cli["median_s"],
        "load_repo_best": naive["best_s"] / ours["best_s"],
        "load_repo_median": naive["median_s"] / ours["median_s"],
    }
    acceptance = {
        f"cold `reconciler validate` median {cli['median_s']:.2f} s < {args.max_seconds} s": (
            cli["median_s"] < args.max_seconds
        ),
        f"naive / ours (CLI) >= {args.min_ratio}x (best and median)": (
            min(ratio["cli_best"], ratio["cli_median"]) >= args.min_ratio
        ),
        "same non-empty errors on the corrupted copy (CLI, load_repo, naive)": (
            check["same_errors"]
        ),
        "every planted mistake found in its file, nothing else": (
            not check["missed"] and not check["unexpected"]
        ),
    }
    result: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            # set here: every process compiles the package from source (no .pyc), ~0.1 s
            "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE", ""),
        },
        "fleet": {**sizes, "corrupt_copy": args.corrupt},
        "repo": str(repo),
        "files": _files(repo),
        "generation_s": generation,
        "ours_cli": cli,
        "ours_load_repo": ours,
        "naive": naive,
        "ratio": ratio,
        "corrupted": check,
        "acceptance": acceptance,
    }
    print(report(result, series))
    (workdir / "validate.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nresults: {workdir / 'validate.json'}")
    return 0 if all(acceptance.values()) else 1


def measure_overrides(
    workdir: Path, sizes: dict[str, int], fraction: float, repeat: int
) -> dict[str, Any]:
    """``load_repo`` cold on the fleet without and with overrides, interleaved; both valid."""
    plain, _ = fleet(workdir, {**sizes, "corrupt": 0})
    loaded, _ = fleet(workdir, {**sizes, "corrupt": 0, "overrides": fraction})
    with_config = sum("\n      config:" in p.read_text() for p in (loaded / "runtimes").iterdir())
    series = {"without": Series("without overrides"), "with": Series("with overrides")}
    for _ in range(repeat):
        for key, repo in (("without", plain), ("with", loaded)):
            elapsed, child = run_child(OURS, repo)
            _expect_valid(child, sizes["runtimes"], series[key].name)
            series[key].wall.append(elapsed)
            series[key].in_process.append(child["load_s"])
    summary = {key: s.summary(sizes["runtimes"]) for key, s in series.items()}
    in_process = {key: statistics.median(s.in_process) for key, s in series.items()}
    return {
        "fleet": sizes,
        "runtimes_with_config": with_config,
        "summary": summary,
        "load_repo_median_s": in_process,
        "ratio_wall_median": summary["with"]["median_s"] / summary["without"]["median_s"],
        "ratio_load_repo_median": in_process["with"] / in_process["without"],
    }


def overrides_main(args: argparse.Namespace, sizes: dict[str, int], workdir: Path) -> int:
    """``--overrides``: print and write (``<workdir>/overrides.json``) what overrides cost."""
    _progress(f"overrides on {args.overrides:.0%} of {args.runtimes} runtimes; measuring")
    result = measure_overrides(workdir, sizes, args.overrides, args.repeat)
    ok = result["ratio_load_repo_median"] <= args.max_override_ratio
    rows = [["fleet", "runs", "best", "median", "load_repo median"]]
    for key in ("without", "with"):
        summary = result["summary"][key]
        rows.append(
            [
                f"{key} overrides",
                str(args.repeat),
                _s(summary["best_s"]),
                _s(summary["median_s"]),
                _s(result["load_repo_median_s"][key]),
            ]
        )
    print(table(rows))
    print(
        f"\n{result['runtimes_with_config']} runtimes with a config; with / without: "
        f"{result['ratio_wall_median']:.3f} (process), {result['ratio_load_repo_median']:.3f} "
        f"(load_repo) <= {args.max_override_ratio}: {'ok' if ok else 'FAILED'}"
    )
    (workdir / "overrides.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if ok else 1


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _files(repo: Path) -> int:
    return sum(1 for _ in repo.rglob("*.yaml"))


if __name__ == "__main__":
    raise SystemExit(main())
