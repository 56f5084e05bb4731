"""Kustomize overlays built by the real kustomize in kubectl (reconciler.render.kustomize)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from reconciler.config.validate import Validation
from reconciler.core.model import ConfigRepo, ModuleKind, TemplateSource
from reconciler.core.render import Renderer
from reconciler.core.resolve import resolve_runtime
from reconciler.core.templates import RenderCache, RenderRequest
from reconciler.errors import RenderError
from reconciler.render.engines import KindRenderer
from reconciler.render.kustomize import KustomizeRenderer
from reconciler.source.loader import load_repo
from tests.support.http_fakes import CountingServer
from tests.support.render_modules import OVERLAY, overlay_files
from tests.support.repos import RepoFactory, channel_file, dump, runtime_file


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
    validation = _load(make_repo, {"resources": ["base"], "patches": [{"path": "missing.yaml"}]})
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
    assert (error.rule, error.line, error.pointer) == ("C6", 3, "/resources/1")
    assert error.path.endswith("modules/board/1.0.0/kustomization.yaml")
    assert "'github.com/example/deploy//base?ref=v1' is a remote resource" in error.message
    assert "not found" not in error.message


@pytest.mark.parametrize("missing", ["extra.yaml", "configs/more.yaml", "folder"])
def test_a_local_resource_that_does_not_exist_is_named_as_missing(
    make_repo: RepoFactory, missing: str
) -> None:
    validation = _load(make_repo, {"resources": ["base", missing]})

    (error,) = validation.diagnostics
    assert (error.line, error.pointer) == (3, "/resources/1")
    assert f"'{missing}' is neither a file nor a folder of the version folder" in error.message
    assert "remote" not in error.message


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


@pytest.fixture
def served() -> Iterator[CountingServer]:
    """A host that a kustomization names: every request to it is counted."""
    server = CountingServer(b"- op: replace\n  path: /spec/replicas\n  value: 9\n")
    try:
        yield server
    finally:
        server.close()


#: Each field of a kustomization that names a file, set to a URL ("URL" is replaced).
_TARGET = {"kind": "Deployment", "name": "board-operator"}
_NAMED_BY_FIELD: dict[str, dict[str, Any]] = {
    "resources": {"resources": ["base", "URL/deployment.yaml"]},
    "components": {"resources": ["base"], "components": ["URL/component"]},
    "bases": {"bases": ["URL/base"]},
    "crds": {"resources": ["base"], "crds": ["URL/crd.yaml"]},
    "configurations": {"resources": ["base"], "configurations": ["URL/config.yaml"]},
    "patches": {"resources": ["base"], "patches": [{"path": "URL/patch.yaml", "target": _TARGET}]},
    "patchesJson6902": {
        "resources": ["base"],
        "patchesJson6902": [{"path": "URL/patch.yaml", "target": _TARGET}],
    },
    "patchesStrategicMerge": {"resources": ["base"], "patchesStrategicMerge": ["URL/p.yaml"]},
    "replacements": {"resources": ["base"], "replacements": [{"path": "URL/r.yaml"}]},
    **{
        f"{generator}.{field}{suffix}": {
            "resources": ["base"],
            generator: [{"name": "leak", field: named}],
        }
        for generator in ("configMapGenerator", "secretGenerator")
        for field, suffix, named in (
            ("files", "", ["URL/secret.txt"]),
            ("files", " key=", ["secret.txt=URL/secret.txt"]),
            ("envs", "", ["URL/x.env"]),
            ("env", "", "URL/x.env"),
        )
    },
    "openapi": {"resources": ["base"], "openapi": {"path": "URL/schema.json"}},
    "generators": {"resources": ["base"], "generators": ["URL/generator.yaml"]},
    "transformers": {"resources": ["base"], "transformers": ["URL/transformer.yaml"]},
    "validators": {"resources": ["base"], "validators": ["URL/validator.yaml"]},
    "transformers inline": {
        "resources": ["base"],
        "transformers": [
            "apiVersion: builtin\nkind: PatchTransformer\nmetadata: {name: p}\n"
            "path: URL/patch.yaml\ntarget: {kind: Deployment}\n"
        ],
    },
    "helmCharts": {
        "resources": ["base"],
        "helmCharts": [{"name": "x", "valuesFile": "URL/values.yaml"}],
    },
}


def _with_url(value: Any, url: str) -> Any:
    if isinstance(value, str):
        return value.replace("URL", url)
    if isinstance(value, list):
        return [_with_url(v, url) for v in value]
    if isinstance(value, dict):
        return {k: _with_url(v, url) for k, v in value.items()}
    return value


@pytest.mark.parametrize("field", sorted(_NAMED_BY_FIELD))
def test_a_url_in_any_field_that_names_a_file_is_refused_at_its_place_and_never_fetched(
    make_repo: RepoFactory, served: CountingServer, field: str
) -> None:
    validation = _load(make_repo, _with_url(_NAMED_BY_FIELD[field], served.url))

    (error,) = validation.diagnostics
    assert error.rule == "C6"
    assert error.path.endswith("modules/board/1.0.0/kustomization.yaml")
    assert error.line > 1
    assert error.pointer.startswith("/" + field.split(".")[0].split(" ")[0])
    assert "is a remote resource: builds are offline" in error.message
    assert served.requests == []


def test_a_plugin_configuration_file_naming_a_url_is_refused_in_that_file(
    make_repo: RepoFactory, served: CountingServer
) -> None:
    transformer = {
        "apiVersion": "builtin",
        "kind": "PatchTransformer",
        "metadata": {"name": "p"},
        "path": f"{served.url}/patch.yaml",
        "target": _TARGET,
    }
    tree = {
        **overlay_files({"resources": ["base"], "transformers": ["patch.yaml"]}),
        "modules/board/1.0.0/patch.yaml": dump(transformer),
        **channel_file("regular", {"board": "1.0.0"}),
        **runtime_file("r0", "regular", [{"name": "board"}]),
    }
    renderer = KindRenderer({ModuleKind.KUSTOMIZE: KustomizeRenderer()})

    validation = load_repo(make_repo(tree), renderer=renderer)

    (error,) = validation.diagnostics
    assert (error.rule, error.path.rsplit("/", 1)[1], error.pointer) == (
        "C6",
        "patch.yaml",
        "/path",
    )
    assert error.line == 5  # dump() sorts the keys: apiVersion, kind, metadata, name, path
    assert served.requests == []


@pytest.mark.parametrize(
    ("named", "problem"),
    [
        ({"resources": ["base", "/etc/kubernetes"]}, "is an absolute path"),
        ({"resources": ["base", "../../../../../tmp/elsewhere"]}, "climbs out of the version"),
        ({"resources": ["./base/../base"]}, None),  # stays inside the folder
        (
            {
                "resources": ["base"],
                "configMapGenerator": [{"name": "x", "files": ["/etc/hostname"]}],
            },
            "is an absolute path",
        ),
    ],
)
def test_a_path_out_of_the_version_folder_is_refused_by_rule(
    make_repo: RepoFactory, named: dict[str, Any], problem: str | None
) -> None:
    validation = _load(make_repo, named)

    if problem is None:
        assert validation.repo is not None, [d.format() for d in validation.diagnostics]
        return
    (error,) = validation.diagnostics
    assert error.rule == "C6"
    assert error.path.endswith("modules/board/1.0.0/kustomization.yaml")
    assert problem in error.message


def test_the_renderer_refuses_a_url_itself_before_building(served: CountingServer) -> None:
    overlay = _with_url(_NAMED_BY_FIELD["configMapGenerator.files"], served.url)
    folder = "modules/board/1.0.0/"
    files = {
        name.removeprefix(folder): text.encode()
        for name, text in overlay_files(overlay).items()
        if name.startswith(folder)
    }
    template = TemplateSource(ModuleKind.KUSTOMIZE, "sha256:x", files, "modules/board/1.0.0")
    request = RenderRequest("board", "1.0.0", template, {}, "board", "board-system")

    with pytest.raises(RenderError) as refused:
        KustomizeRenderer().render(request)

    assert refused.value.path == "modules/board/1.0.0/kustomization.yaml"
    assert "configMapGenerator[0].files[0]" in str(refused.value)
    assert served.requests == []
