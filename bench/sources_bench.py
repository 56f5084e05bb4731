"""What the ``kustomize`` and ``source`` module kinds cost per render, and what the caches save.

- ``kustomize``: the sample's overlay (``sample-repo/modules/status-board/1.0.0``) built
  ``--runs`` times by :class:`KustomizeRenderer` (one ``kubectl kustomize`` process each: the
  files written to a temporary folder, built, split into objects);
- ``source``: a small chart pushed to a real registry (docker-registry on 127.0.0.1, as the tests
  start it) rendered by :class:`SourceRenderer` with an empty disk cache (``cold``: resolve the
  tag, pull by digest, check, store, render) and with the archive cached (``warm``: a new
  renderer, as a new process would be: read and check the file, render; no registry request);
- a fleet of ``--runtimes`` runtimes taking the overlay, validated: how many builds ran (the
  render cache keys them by content: one).

Prints the best and median seconds of each and the counts, as JSON too in
``bench/out/sources.json``.

    python bench/sources_bench.py --runs 10 --runtimes 1000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler.core.model import ModuleKind
from reconciler.core.templates import RenderCache, RenderRequest
from reconciler.render.engines import KindRenderer
from reconciler.render.kustomize import KustomizeRenderer
from reconciler.render.sources import SourceRenderer
from reconciler.source.loader import load_repo
from tests.support.charts import CHART_TEMPLATES
from tests.support.registries import OciRegistry, package_chart
from tests.support.render_modules import overlay_files, source_module_files
from tests.support.repos import channel_file, runtime_file, write_files

ROOT = Path(__file__).resolve().parent.parent


def _times(runs: int, work: Callable[[], object]) -> dict[str, float]:
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        seconds.append(time.perf_counter() - start)
    return {"best": min(seconds), "median": statistics.median(seconds)}


def _request(folder: Path, runtime: str, module: str) -> RenderRequest:
    """The render request of ``module`` for ``runtime`` in the repo at ``folder``."""
    captured: list[RenderRequest] = []

    class Capture:
        def render(self, request: RenderRequest) -> Any:
            captured.append(request)
            raise RuntimeError("captured")

    renderer = KindRenderer({kind: Capture() for kind in ModuleKind if kind.templated})
    with contextlib.suppress(RuntimeError):  # the first request, captured
        load_repo(folder, renderer=renderer)
    (request,) = [r for r in captured if r.module == module]
    return request


def kustomize(work: Path, runs: int, runtimes: int) -> dict[str, Any]:
    fleet = {**overlay_files(), **channel_file("regular", {"board": "1.0.0"})}
    for index in range(runtimes):
        fleet.update(runtime_file(f"rt-{index:05d}", "regular", [{"name": "board"}]))
    folder = write_files(work / "kustomize", fleet)
    request = _request(folder, "rt-00000", "board")
    result: dict[str, Any] = _times(runs, lambda: KustomizeRenderer().render(request))
    engine, cache = KustomizeRenderer(), RenderCache()
    start = time.perf_counter()
    load_repo(folder, renderer=KindRenderer({ModuleKind.KUSTOMIZE: engine}), render_cache=cache)
    result["fleet_validate_seconds"] = time.perf_counter() - start
    result["fleet_runtimes"] = runtimes
    result["fleet_builds"] = engine.renders
    return result


def source(work: Path, runs: int) -> dict[str, Any]:
    (work / "registry").mkdir()
    registry = OciRegistry(work / "registry").start()
    try:
        digest = registry.push(package_chart(work, "web", "1.0.0", CHART_TEMPLATES))
        spec = {"url": registry.url("web"), "version": "1.0.0", "digest": digest}
        fleet = {
            **source_module_files({**spec, "plainHttp": True}),
            **channel_file("regular", {"web": "1.0.0"}),
            **runtime_file("one", "regular", [{"name": "web"}]),
        }
        request = _request(write_files(work / "source", fleet), "one", "web")
        cache = work / "cache"

        def cold() -> None:
            shutil.rmtree(cache, ignore_errors=True)
            SourceRenderer(cache).render(request)

        cold()
        warm = _times(runs, lambda: SourceRenderer(cache).render(request))
        return {"cold": _times(runs, cold), "warm": warm}
    finally:
        registry.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--runtimes", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        results = {
            "kustomize": kustomize(work, args.runs, args.runtimes),
            "source": source(work, args.runs),
        }
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "sources.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
