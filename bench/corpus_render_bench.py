"""Rendering real manifests against one C-parser pass over the same files (issue 12).

Builds a config repo in a temporary folder around ``../shared/corpus/prometheus-operator/`` (the
upstream CRDs and operator, 4.5 MB) as one module of one runtime, then times, in this process:

- ``c-pass``: ``yaml.load_all`` with PyYAML's C base loader over the corpus files (the parser and
  nothing else: every scalar a string; its safe loader cannot read the plain ``=``);
- ``load``: reading and validating the config repo (Kubernetes-faithful YAML, schemas, checks);
- ``render``: loading plus resolving and rendering the runtime's objects (as ``reconciler render``
  does, without the YAML output).

Prints the best of ``--repeat`` runs of each and the ratios to the C pass::

    python bench/corpus_render_bench.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from reconciler.core.render import Renderer
from reconciler.core.resolve import resolve_runtime
from reconciler.source.loader import load_repo

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus" / "prometheus-operator"
_LOADER = getattr(yaml, "CBaseLoader", yaml.BaseLoader)  # the parser alone: every scalar a string


def build_repo(root: Path, texts: list[str]) -> None:
    """A config repo with one module (the corpus as its manifest) and one runtime."""
    files = {
        "runtimes/one.yaml": "apiVersion: reconciler.dev/v1alpha1\nkind: Runtime\n"
        "metadata: {name: one}\nspec:\n  channel: regular\n  cluster: {inCluster: true}\n"
        "  modules: [{name: prometheus}]\n",
        "channels/regular.yaml": "apiVersion: reconciler.dev/v1alpha1\nkind: Channel\n"
        "metadata: {name: regular}\nspec: {modules: {prometheus: 0.93.0}}\n",
        "modules/prometheus/module.yaml": "apiVersion: reconciler.dev/v1alpha1\nkind: Module\n"
        "metadata: {name: prometheus}\nspec:\n  namespace: default\n"
        "  operator: {kind: Deployment, name: prometheus-operator}\n",
        "modules/prometheus/0.93.0/manifest.yaml": "---\n".join(texts),
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def best(repeat: int, work: Callable[[], object]) -> float:
    """The shortest of ``repeat`` runs of ``work``, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def render_objects(root: Path) -> int:
    """Load, validate, resolve and render the runtime; the number of objects rendered."""
    validation = load_repo(root)
    if validation.repo is None:
        raise SystemExit("\n".join(d.format() for d in validation.diagnostics))
    config = validation.repo
    resolution = resolve_runtime(config, config.runtimes["one"])
    return len(list(Renderer(config).render(resolution)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    paths = sorted(CORPUS.glob("*/*.yaml"))
    texts = [p.read_text(encoding="utf-8") for p in paths]
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        build_repo(root, texts)
        c_pass = best(args.repeat, lambda: [list(yaml.load_all(t, Loader=_LOADER)) for t in texts])
        load = best(args.repeat, lambda: load_repo(root))
        render = best(args.repeat, lambda: render_objects(root))
        objects = render_objects(root)
    size = sum(len(t.encode()) for t in texts) / 1e6
    print(f"corpus: {len(paths)} files, {size:.1f} MB, {objects} objects rendered")
    print(
        f"c-pass {c_pass:.3f} s | load {load:.3f} s ({load / c_pass:.2f}x) | "
        f"render {render:.3f} s ({render / c_pass:.2f}x)"
    )


if __name__ == "__main__":
    main()
