"""Kustomize overlays built by the real kustomize in kubectl (reconciler.render.kustomize)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.config.validate import Validation
from reconciler.core.model import ConfigRepo, ModuleKind
from reconciler.core.render import Renderer
from reconciler.core.resolve import resolve_runtime
from reconciler.core.templates import RenderCache
from reconciler.render.engines import KindRenderer
from reconciler.render.kustomize import KustomizeRenderer
from reconciler.source.loader import load_repo
from tests.support.render_modules import OVERLAY, overlay_files
from tests.support.repos import RepoFactory, channel_file, runtime_file


def _load(
    make_repo: RepoFactory,
    overlay: Mapping[str, Any] = OVERLAY,
    engine: KustomizeRenderer | None = None,
    cache: RenderCache | None = None,
    runtimes: int = 1,
) -> Validation:
    tree = {**overlay_files(overlay), **channel_file("regular", {"board": "1.0.0"})}
    for index in range(runtimes):
        tree.update(runtime_file(f"r{index}", "regular", [{"name": "board"}]))
    renderer = KindRenderer({ModuleKind.KUSTOMIZE: engine or KustomizeRenderer()})
    return load_repo(make_repo(tree), renderer=renderer, render_cache=cache)


def _objects(repo: ConfigRepo, runtime: str) -> dict[str, Mapping[str, Any]]:
    resolution = resolve_runtime(repo, repo.runtimes[runtime])
    return {o.body["kind"]: o.body for o in Renderer(repo).render(resolution)}


def test_an_overlay_over_its_base_is_built_as_kustomize_builds_it(make_repo: RepoFactory) -> None:
    validation = _load(make_repo)
    repo = validation.repo
    assert repo is not None, [d.format() for d in validation.diagnostics]
    assert repo.modules["board"].versions["1.0.0"].kind is ModuleKind.KUSTOMIZE
    objects = _objects(repo, "r0")
    assert objects["Deployment"]["spec"]["replicas"] == 3  # the overlay's patch over the base
    settings = objects["ConfigMap"]
    assert settings["data"] == {"TITLE": "ours"}
    assert settings["metadata"]["name"].startswith("board-settings-")  # kustomize's hash suffix
    assert settings["metadata"]["namespace"] == "board-system"  # then treated like a manifest
    assert settings["metadata"]["labels"]["reconciler.dev/module"] == "board"


def test_a_build_error_is_one_line_at_the_version_folder(make_repo: RepoFactory) -> None:
    validation = _load(make_repo, {"resources": ["base", "missing.yaml"]})
    (error,) = validation.diagnostics
    assert error.rule == "C9"
    assert error.path.endswith("modules/board/1.0.0/kustomization.yaml")
    assert "does not render for runtime r0" in error.message
    assert "missing.yaml" in error.message
    assert "\n" not in error.message
    assert "reconciler-kustomize-" not in error.message  # the private build folder is not shown
    assert "rror:" not in error.message  # kubectl's prefix is not repeated


def test_a_remote_resource_is_refused_before_any_build(make_repo: RepoFactory) -> None:
    engine = KustomizeRenderer(kubectl="/nonexistent/kubectl")  # a build would fail otherwise
    remote = {"resources": ["base", "github.com/example/deploy//base?ref=v1"]}
    validation = _load(make_repo, remote, engine)
    (error,) = validation.diagnostics
    assert "kustomization.yaml: 'github.com/example/deploy//base?ref=v1' is a remote resource" in (
        error.message
    )
    assert "not found" not in error.message


def test_overlays_are_built_once_per_content(make_repo: RepoFactory) -> None:
    engine, cache = KustomizeRenderer(), RenderCache()
    validation = _load(make_repo, engine=engine, cache=cache, runtimes=4)
    assert validation.repo is not None
    assert len(validation.repo.rendered) == 4
    assert engine.renders == 1


def test_values_given_to_an_overlay_are_reported_as_unused(make_repo: RepoFactory) -> None:
    tree = {
        **overlay_files(),
        **channel_file("regular", {"board": "1.0.0"}),
        **runtime_file("r0", "regular", [{"name": "board", "values": {"replicas": 5}}]),
    }
    renderer = KindRenderer({ModuleKind.KUSTOMIZE: KustomizeRenderer()})

    validation = load_repo(make_repo(tree), renderer=renderer)

    assert validation.repo is not None  # a warning: the repo stays valid
    (warning,) = validation.warnings
    assert warning.path.endswith("runtimes/r0.yaml")
    assert "board 1.0.0 is a Kustomize overlay, not a chart: these values are not used" in (
        warning.message
    )
