"""Chart modules at fleet scale: validate and fleet diff of a fleet whose every runtime takes a
Helm chart module, against the same fleet with plain manifests (issue 27).

Generates a fleet (default 1,000 runtimes x 10 modules, ``tests/support/fleet_generator.py``)
twice, in two git repositories: **plain** as generated, and **chart**, where the mandatory
module ``mod-00`` (every runtime gets it) is a Helm chart in each version folder (``chart/``
with ``Chart.yaml``, ``values.yaml`` and the version's manifest as its one template, the
operator's ``replicas`` read from ``.Values.replicas``, and a ``values.schema.json`` that checks
it) and each of the three channels gives it
its own value set (``spec.values.mod-00.replicas``: 1, 2, 3). Both are committed; then the
working tree bumps ``mod-00`` in the ``regular`` channel (1.0.0 -> 1.1.0: a chart bump in the
chart fleet).

Times whole processes (interpreter start and imports included; bytecode written first, as pip
writes it), interleaved so load on the machine hits both alike: ``reconciler validate DIR`` and
``reconciler diff DIR --base HEAD``. CPU time (user + system, children included) is the
figure: it varies far less than wall time while other work shares the machine. Acceptance:
chart / plain at most ``--max-ratio`` (1.5) for both commands, by best CPU time. Renders are
counted in this process with the same code paths (``load_repo`` with a ``RenderCache``, and the
review of ``diff --base``, whose one cache serves both revisions) and printed.

    python bench/chart_fleet_bench.py --runtimes 1000 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.core.templates import RenderCache  # noqa: E402
from reconciler.render import default_renderer  # noqa: E402
from reconciler.review.fleet import Review, Side  # noqa: E402
from reconciler.source.loader import ReadOptions, load_repo  # noqa: E402
from tests.support.fleet_generator import generate_fleet  # noqa: E402

GIT = ["git", "-c", "user.email=bench@example.io", "-c", "user.name=bench"]
CHART_MODULE = "mod-00"
VALUE_SETS = {"regular": 1, "fast": 2, "experimental": 3}
#: The chart's values.schema.json: every runtime's merged values are checked against it (C9).
SCHEMA = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "additionalProperties": False,
        "properties": {"replicas": {"type": "integer", "minimum": 1}},
    }
)


def prepare(workdir: Path, runtimes: int, modules: int) -> dict[str, Path]:
    """The plain and the chart fleet, each a git repository with the bump in its work tree."""
    repos = {}
    for name in ("plain", "chart"):
        repo = workdir / f"chartfleet-{name}-{runtimes}x{modules}"
        if repo.exists():
            shutil.rmtree(repo)
        generate_fleet(repo, runtimes, modules=modules)
        if name == "chart":
            make_chart_module(repo)
        subprocess.run([*GIT, "init", "-q"], cwd=repo, check=True)
        subprocess.run([*GIT, "add", "-A"], cwd=repo, check=True)
        subprocess.run([*GIT, "commit", "-qm", "fleet"], cwd=repo, check=True)
        channel = repo / "channels" / "regular.yaml"
        bumped = f"{CHART_MODULE}: 1.1.0"
        channel.write_text(channel.read_text().replace(f"{CHART_MODULE}: 1.0.0", bumped))
        repos[name] = repo
    return repos


def make_chart_module(repo: Path) -> None:
    """``mod-00``'s versions as charts, and a value set of it in each channel."""
    for folder in sorted((repo / "modules" / CHART_MODULE).iterdir()):
        manifest = folder / "manifest.yaml"
        if not manifest.is_file():
            continue
        text = manifest.read_text()
        assert "  replicas: 1\n" in text
        templates = folder / "chart" / "templates"
        templates.mkdir(parents=True)
        (templates / "manifest.yaml").write_text(
            text.replace("  replicas: 1\n", "  replicas: {{ .Values.replicas }}\n")
        )
        (folder / "chart" / "Chart.yaml").write_text(
            f"apiVersion: v2\nname: {CHART_MODULE}\nversion: {folder.name}\n"
            f'appVersion: "{folder.name}"\n'
        )
        (folder / "chart" / "values.yaml").write_text("replicas: 1\n")
        (folder / "chart" / "values.schema.json").write_text(SCHEMA)
        manifest.unlink()
    for channel, replicas in VALUE_SETS.items():
        path = repo / "channels" / f"{channel}.yaml"
        values = f"  values:\n    {CHART_MODULE}: {{replicas: {replicas}}}\n"
        path.write_text(path.read_text().rstrip("\n") + "\n" + values)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of ``python -m reconciler ARGS`` in a fresh process."""
    wall, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    if done.returncode not in (0, 1, 3):
        raise SystemExit(f"{args[0]} failed ({done.returncode}): {done.stdout[-1000:]}")
    return time.perf_counter() - wall, _children_cpu() - cpu


def count_renders(repo: Path) -> dict[str, int]:
    """Renders of one validation and of one ``diff --base`` review (both revisions)."""
    cache = RenderCache()
    validation = load_repo(repo, renderer=default_renderer(), render_cache=cache)
    assert validation.repo is not None, [d.format() for d in validation.diagnostics[:3]]
    review = Review(ReadOptions())
    review.load(Side(repo, "HEAD"), "base")
    review.load(Side(repo), "head")
    return {"validate": cache.renders, "diff_base": review.renders.renders}


def command_line(command: str, repo: Path) -> list[str]:
    """The arguments of ``command`` on ``repo``."""
    if command == "validate":
        return ["validate", str(repo)]
    return ["diff", str(repo), "--base", "HEAD", "--now", "2026-11-20T10:00"]


def measure(repos: dict[str, Path], repeat: int) -> dict[str, Any]:
    """Best and all CPU and wall times of each command on each fleet, interleaved."""
    commands = ("validate", "diff_base")
    runs: dict[str, dict[str, list[tuple[float, float]]]] = {
        c: {f: [] for f in repos} for c in commands
    }
    for _ in range(repeat):
        for command in commands:
            for fleet, repo in repos.items():
                runs[command][fleet].append(run_once(command_line(command, repo)))
    results: dict[str, Any] = {}
    for command, fleets in runs.items():
        best = {f: min(c for _, c in costs) for f, costs in fleets.items()}
        results[command] = {
            "best_cpu_s": best,
            "best_wall_s": {f: min(w for w, _ in costs) for f, costs in fleets.items()},
            "ratio_cpu": best["chart"] / best["plain"],
        }
    return results


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (results also in ``<workdir>/chartfleet.json``); exit 1 when a
    ratio is over ``--max-ratio``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtimes", type=int, default=1000)
    parser.add_argument("--modules", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-ratio", type=float, default=1.5)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args(argv)
    repos = prepare(args.workdir, args.runtimes, args.modules)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "reconciler")], check=True)
    results: dict[str, Any] = {"runtimes": args.runtimes, "modules": args.modules}
    results["renders"] = count_renders(repos["chart"])
    results |= measure(repos, args.repeat)
    ok = all(results[c]["ratio_cpu"] <= args.max_ratio for c in ("validate", "diff_base"))
    results["acceptance"] = {"max_ratio": args.max_ratio, "pass": ok}
    print(json.dumps(results, indent=2))
    (args.workdir / "chartfleet.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
